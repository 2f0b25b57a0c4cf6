// TypeScript works too (types are stripped; no typechecking).
interface Note { key: string; text: string }
await tools.note_write({ key: "todo", text: "ship code mode" });
const keys: string[] = ["welcome", "todo", "missing"];
const found: Note[] = [];
for (const key of keys) {
  try {
    found.push((await tools.note_read({ key })) as Note);
  } catch (e) {
    text(`skipped ${key}: ${(e as Error).message}`);
  }
}
return found;
