#!/usr/bin/env node
// The package's command: the compiled CLI lives in dist/ (npm run build).
import "../dist/cli/main.js";
