'use strict';
// lspArgs, diagnoseArgs and normalizeConfig (out/args.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const { lspArgs, diagnoseArgs, kbArgs, normalizeConfig } = require('../out/args.js');

const cases = [
  { name: 'no kb directories', cfg: { path: 'firstfault', kbDirs: [] }, lsp: ['lsp'], kb: [] },
  { name: 'one kb directory', cfg: { path: 'firstfault', kbDirs: ['/team/kb'] }, lsp: ['lsp', '--kb', '/team/kb'], kb: ['--kb', '/team/kb'] },
  {
    name: 'two kb directories keep their order',
    cfg: { path: '/opt/ff/bin/firstfault', kbDirs: ['/a', 'rel/b'] },
    lsp: ['lsp', '--kb', '/a', '--kb', 'rel/b'],
    kb: ['--kb', '/a', '--kb', 'rel/b'],
  },
  {
    name: 'a directory with spaces and a leading dash stays one argument',
    cfg: { path: 'firstfault', kbDirs: ['/my kb', '-odd'] },
    lsp: ['lsp', '--kb', '/my kb', '--kb', '-odd'],
    kb: ['--kb', '/my kb', '--kb', '-odd'],
  },
];

for (const c of cases) {
  test(`lspArgs: ${c.name}`, () => {
    assert.deepEqual(lspArgs(c.cfg), c.lsp);
    assert.deepEqual(kbArgs(c.cfg), c.kb);
  });
  test(`diagnoseArgs: ${c.name}`, () => {
    assert.deepEqual(diagnoseArgs(c.cfg), ['diagnose', '--no-history', '--quiet', '--format', 'html', ...c.kb, '-']);
  });
}

test('diagnoseArgs ends with - (stdin) after every option', () => {
  const args = diagnoseArgs({ path: 'x', kbDirs: ['/k1', '/k2'] });
  assert.equal(args[args.length - 1], '-');
  assert.equal(args.filter((a) => a === '-').length, 1);
});

const configs = [
  { name: 'defaults', raw: {}, want: { path: 'firstfault', kbDirs: [] } },
  { name: 'blank path', raw: { path: '   ', kbDirs: undefined }, want: { path: 'firstfault', kbDirs: [] } },
  { name: 'non-string path', raw: { path: 42 }, want: { path: 'firstfault', kbDirs: [] } },
  { name: 'path trimmed', raw: { path: ' /usr/bin/firstfault ' }, want: { path: '/usr/bin/firstfault', kbDirs: [] } },
  { name: 'kbDirs not an array', raw: { kbDirs: '/kb' }, want: { path: 'firstfault', kbDirs: [] } },
  { name: 'kbDirs: blanks and non-strings dropped', raw: { kbDirs: ['/a', '', '  ', 3, null, ' /b '] }, want: { path: 'firstfault', kbDirs: ['/a', '/b'] } },
  { name: '~ expanded with a home', raw: { path: '~/bin/firstfault', kbDirs: ['~', '~/kb', 'a~/b'] }, home: '/home/u', want: { path: '/home/u/bin/firstfault', kbDirs: ['/home/u', '/home/u/kb', 'a~/b'] } },
  { name: '~ kept without a home', raw: { kbDirs: ['~/kb'] }, want: { path: 'firstfault', kbDirs: ['~/kb'] } },
];
for (const c of configs) {
  test(`normalizeConfig: ${c.name}`, () => {
    assert.deepEqual(normalizeConfig(c.raw, c.home), c.want);
  });
}

const { serverCommandsToRegister, EXTENSION_COMMANDS } = require('../out/args.js');
const serverCommandCases = [
  {
    name: "the server's list as firstfault lsp sends it",
    server: ['firstfault.explain', 'firstfault.copyFix', 'firstfault.diagnoseFolder'],
    want: ['firstfault.explain', 'firstfault.copyFix'],
  },
  { name: 'none listed', server: undefined, want: [] },
  { name: 'an empty list', server: [], want: [] },
  { name: 'other commands kept, non-strings dropped', server: ['a.b', 1, null, 'firstfault.diagnoseSelection'], want: ['a.b'] },
];
for (const c of serverCommandCases) {
  test(`serverCommandsToRegister: ${c.name}`, () => assert.deepEqual(serverCommandsToRegister(c.server), c.want));
}

test('EXTENSION_COMMANDS are the commands package.json contributes', () => {
  const pkg = require('../package.json');
  assert.deepEqual([...EXTENSION_COMMANDS].sort(), pkg.contributes.commands.map((c) => c.command).sort());
  for (const name of EXTENSION_COMMANDS) assert.ok(pkg.activationEvents.includes(`onCommand:${name}`), name);
});
