// Find a tool by what it does, read its schema, call it.
const hits = await tools.search("weather in a city");
const weather = await tools.describe(hits[0].id);
text(`using ${weather.id} with ${Object.keys(weather.parameters.properties).join(", ")}`);
return await tools.call(weather.id, { city: "Lisbon" });
