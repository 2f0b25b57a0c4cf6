// The slice of the WebAssembly JS API this project uses. Node has it at runtime, but
// @types/node 20 does not declare it, and the DOM lib would bring browser globals.
declare namespace WebAssembly {
  interface Module {
    readonly __brand?: "WebAssembly.Module";
  }
  interface Memory {
    readonly buffer: ArrayBuffer;
    grow(deltaPages: number): number;
  }
  function compile(bytes: Uint8Array | ArrayBuffer): Promise<Module>;
}
