// 16 nested calls in parallel, one exec, no extra model turn.
const squares = await Promise.all(Array.from({ length: 16 }, (_, n) => tools.slow_square({ n })));
return squares.reduce((a, b) => a + b, 0);
