// The command line of a teacher script: its first `count` arguments, and an
// integer option's value (--name N) or its default. Fewer arguments than
// `count`: the usage line on stderr and exit code 2.
"use strict";

function positional(usage, count) {
  const args = process.argv.slice(2);
  if (args.length < count) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return args.slice(0, count);
}

function intOption(name, def) {
  const args = process.argv.slice(2);
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? parseInt(args[i + 1], 10) : def;
}

module.exports = { positional, intOption };
