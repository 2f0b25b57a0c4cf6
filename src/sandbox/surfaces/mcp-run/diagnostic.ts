/**
 * One finding of a codemode.run script (spec 3.4): a syntax or import failure found
 * before the script runs, or how it ended. Its own module so the module transform and
 * the response builder can both name it without importing each other.
 */
export type Diagnostic = { severity: "error" | "warning" | "info"; code: string; message: string; hint?: string; path?: string; errorClass?: string };
