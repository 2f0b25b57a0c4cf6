#!/usr/bin/env node
// The package's command. `npm run build` compiles the CLI into dist/ and bundles it with a
// V8 code cache; dist/cli/launch.js runs that bundle when it is current, else the modules.
import { launch } from "../dist/cli/launch.js";

if (!launch()) await import("../dist/cli/main.js");
