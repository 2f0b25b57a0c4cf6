// A tool slower than the exec's timeout: run with --timeout-ms 500. The exec returns
// `waiting` with a runId; the CLI follows it with `wait`, as a model would, and the
// program continues in a VM restored from its snapshot.
text("asking for the report");
const report = await tools.build_report({ topic: "code mode" });
text(`the report has ${report.pages} pages`);
return report;
