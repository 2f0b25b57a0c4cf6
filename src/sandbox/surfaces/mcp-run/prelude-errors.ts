/**
 * `@codemode/errors` inside the sandbox (spec 7): the error classes, each with a `hint`
 * (one corrective action), and how a host or gateway failure becomes one of them.
 *
 * A failure reaches the guest as `{name, message}`. When `name` is one of the classes and
 * `message` is a JSON object (`{"message", "hint", "path", "expected", "received",
 * "example"}`), its fields are the error's: the sidecar's input validation answers that
 * way, and so may a gateway. For a tool call, every other failure is a ToolCallError (the
 * tool or the way to it failed; spec 10), its name kept in the message. Classes and prototypes are frozen, so guest code cannot change what the
 * bindings throw; instances carry their class name as an own `name`, so a subclass may
 * still set its own.
 *
 * A source fragment spliced into the MCP-run prelude after prelude-marshal's.
 */
export const ERRORS_SOURCE = String.raw`
  const ERROR_FIELDS = ["serverId", "toolName", "exportName", "path", "expected", "received", "example", "result", "limit"];
  const DEFAULT_HINTS = {
    CodemodeError: "Read the message and change the call accordingly.",
    SchemaValidationError: "Fix the input so it matches the tool's input schema (getTool(serverId, toolName) shows it).",
    ToolNotFoundError: "Use an exact tool name: listTools(serverId) or the module's __meta__.tools lists them.",
    ServerNotFoundError: "Use a connected server id: listServers() lists them.",
    ToolCallError: "Read error.message (and error.result), then change the input or handle the failure; other calls are unaffected.",
    AuthenticationError: "The server rejected the credentials; the script cannot fix this, so report it to the user.",
    SandboxLimitError: "Do less per run (filter, aggregate, fewer calls) or raise the limit within the host's maximum.",
  };
  function initError(err, className, options) {
    defineProperty(err, "name", dataDesc(className, true, false, true));
    const o = options !== null && typeof options === "object" ? options : null;
    // An options bag is read as a web API would, except nothing inherited from Object.prototype.
    const given = o === null ? undefined : optionOf(o, "hint");
    const hint = typeof given === "string" && given !== "" ? given : DEFAULT_HINTS[className];
    defineProperty(err, "hint", dataDesc(hint, true, true, true));
    if (o === null) return;
    for (let i = 0; i < ERROR_FIELDS.length; i++) {
      const k = ERROR_FIELDS[i];
      if (!hasOwn(o, k)) continue;
      const v = o[k];
      if (v !== undefined) defineProperty(err, k, dataDesc(v, true, true, true));
    }
  }
  class CodemodeError extends ErrorCtor {
    constructor(message, options) { super(message === undefined ? "" : StringCtor(message)); initError(this, "CodemodeError", options); }
  }
  class SchemaValidationError extends CodemodeError {
    constructor(message, options) { super(message, options); initError(this, "SchemaValidationError", options); }
  }
  class ToolNotFoundError extends CodemodeError {
    constructor(message, options) { super(message, options); initError(this, "ToolNotFoundError", options); }
  }
  class ServerNotFoundError extends CodemodeError {
    constructor(message, options) { super(message, options); initError(this, "ServerNotFoundError", options); }
  }
  class ToolCallError extends CodemodeError {
    constructor(message, options) { super(message, options); initError(this, "ToolCallError", options); }
  }
  class AuthenticationError extends ToolCallError {
    constructor(message, options) { super(message, options); initError(this, "AuthenticationError", options); }
  }
  class SandboxLimitError extends CodemodeError {
    constructor(message, options) { super(message, options); initError(this, "SandboxLimitError", options); }
  }
  const ERROR_CLASSES = { CodemodeError, SchemaValidationError, ToolNotFoundError, ServerNotFoundError, ToolCallError, AuthenticationError, SandboxLimitError };
  const errorClassNames = keysOf(ERROR_CLASSES);
  for (let i = 0; i < errorClassNames.length; i++) {
    const C = ERROR_CLASSES[errorClassNames[i]];
    defineProperty(C.prototype, "name", dataDesc(errorClassNames[i], false, false, false));
    freeze(C.prototype);
    freeze(C);
  }
  const CodemodeErrorProto = CodemodeError.prototype;

  /** The codemode class an error is an instance of (its own built-in class name), or "". */
  function codemodeClassOf(e) {
    if (e === null || typeof e !== "object" || !protoIs(e, CodemodeErrorProto)) return "";
    let p = getProto(e);
    for (let i = 0; i < 64 && p !== null; i++) {
      const d = getOwnDesc(p, "name");
      if (d !== undefined && hasOwn(d, "value") && typeof d.value === "string" && hasOwn(ERROR_CLASSES, d.value) && ERROR_CLASSES[d.value].prototype === p) return d.value;
      p = getProto(p);
    }
    return "";
  }

  /** Options for an error about one tool: who it is about, plus extra fields. */
  function about(server, tool, extra) {
    const o = create(null);
    if (server) o.serverId = server.serverId;
    if (tool) { o.toolName = tool.toolName; o.exportName = tool.exportName; }
    if (extra) { const ks = keysOf(extra); for (let i = 0; i < ks.length; i++) o[ks[i]] = extra[ks[i]]; }
    return o;
  }

  /** A failure answered by the host or the gateway, as the guest sees it. */
  function errorFromAnswer(data, server, tool) {
    // Own fields only: an answer without a message must not pick one up from Object.prototype.
    const dataName = ownData(data, "name"), dataMessage = ownData(data, "message");
    const name = typeof dataName === "string" ? dataName : "Error";
    let message = typeof dataMessage === "string" ? dataMessage : "";
    let details = null;
    if (apply(stringIndexOf, message, ["{"]) === 0) {
      try { const d = parse(message); if (d !== null && typeof d === "object" && !isArray(d)) details = d; } catch (_) { details = null; }
    }
    const extra = create(null);
    if (details !== null) {
      const keys = ["hint", "path", "expected", "received", "example", "limit"];
      for (let i = 0; i < keys.length; i++) if (hasOwn(details, keys[i])) extra[keys[i]] = details[keys[i]];
      const detailsMessage = ownData(details, "message");
      message = typeof detailsMessage === "string" ? detailsMessage : message;
    }
    const label = server && tool ? server.serverId + "." + tool.exportName : "";
    // A failed call is a ToolCallError (spec 10) unless the input was refused, credentials were, or a limit hit.
    const C = name === "RangeError" ? SandboxLimitError
      : tool && !(name === "SchemaValidationError" || name === "AuthenticationError" || name === "SandboxLimitError") ? ToolCallError
      : name === "ToolNotFound" ? ToolNotFoundError
      : hasOwn(ERROR_CLASSES, name) && name !== "CodemodeError" ? ERROR_CLASSES[name] : ToolCallError;
    if (C === ToolCallError && name !== "ToolCallError" && name !== "Error") message = name + ": " + message;
    if (C === ToolCallError && label !== "") message = label + " failed: " + message;
    return new C(message, about(server, tool, extra));
  }
`;
