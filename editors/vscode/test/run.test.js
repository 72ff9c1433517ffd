'use strict';
// run.ts against real programs: node itself, a path that does not exist, and (with FF_BIN) firstfault.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runBinary, spawnErrorMessage, findExecutable, MAX_STDIN_BYTES } = require('../out/run.js');
const { diagnoseArgs } = require('../out/args.js');
const { interpretExit } = require('../out/report.js');

const NODE = process.execPath;

test('runBinary: stdin reaches the program, stdout and stderr come back, no shell', async () => {
  const script = "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{process.stdout.write(s.toUpperCase());process.stderr.write(JSON.stringify(process.argv.slice(1)));process.exit(3)})";
  const r = await runBinary(NODE, ['-e', script, '$HOME', '; echo hi', '-'], { stdin: 'hello µ\n' });
  assert.equal(r.status, 3);
  assert.equal(r.signal, null);
  assert.equal(r.stdout, 'HELLO Μ\n');
  assert.deepEqual(JSON.parse(r.stderr), ['$HOME', '; echo hi', '-']);
  assert.equal(r.stdoutTruncated, false);
});

test('runBinary: every exit status resolves', async () => {
  for (const code of [0, 1, 2, 4, 5]) {
    const r = await runBinary(NODE, ['-e', `process.exit(${code})`]);
    assert.equal(r.status, code);
  }
});

test('runBinary: stdout is bounded', async () => {
  const r = await runBinary(NODE, ['-e', "process.stdout.write('x'.repeat(100000))"], { maxStdoutBytes: 1000 });
  assert.equal(r.status, 0);
  assert.equal(r.stdout, 'x'.repeat(1000));
  assert.equal(r.stdoutTruncated, true);
});

test('runBinary: a program that does not read stdin is not an error', async () => {
  const r = await runBinary(NODE, ['-e', 'process.exit(2)'], { stdin: 'y'.repeat(4 << 20) });
  assert.equal(r.status, 2);
});

test('runBinary: stdin over the cap is refused before anything runs', async () => {
  assert.equal(MAX_STDIN_BYTES, 256 * 1024 * 1024);
  await assert.rejects(runBinary(NODE, ['-e', ''], { stdin: 'z'.repeat(2048), maxStdinBytes: 1024 }), { message: 'firstfault: the text is 2 KiB, over the 1 KiB limit; diagnose the file itself instead' });
});

test('runBinary: a binary that does not exist gives the ENOENT message', async () => {
  const missing = path.join(os.tmpdir(), `firstfault-missing-${process.pid}`, 'firstfault');
  await assert.rejects(runBinary(missing, ['diagnose', '-'], { stdin: 'x' }), {
    message: `firstfault: cannot run '${missing}': not found; set firstfault.path`,
  });
  await assert.rejects(runBinary('firstfault-no-such-binary-xyz', []), {
    message: "firstfault: cannot run 'firstfault-no-such-binary-xyz': not found; set firstfault.path",
  });
});

test('runBinary: a file without an execute bit', async () => {
  // execve refuses a file with no x bit at all, to root as well (EACCES).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ff-run-'));
  const f = path.join(dir, 'firstfault');
  fs.writeFileSync(f, '#!/bin/sh\n', { mode: 0o644 });
  try {
    await assert.rejects(runBinary(f, []), { message: `firstfault: cannot run '${f}': permission denied (is it executable?); set firstfault.path` });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('runBinary: an aborted run is cancelled and its program ended', async () => {
  const ac = new AbortController();
  const started = Date.now();
  const p = runBinary(NODE, ['-e', 'setTimeout(()=>{}, 60000)'], { signal: ac.signal });
  setImmediate(() => ac.abort());
  await assert.rejects(p, { message: 'firstfault: cancelled' });
  const already = new AbortController();
  already.abort();
  await assert.rejects(runBinary(NODE, ['-e', ''], { signal: already.signal }), { message: 'firstfault: cancelled' });
  assert.ok(Date.now() - started < 30000);
});

test('spawnErrorMessage names the setting', () => {
  assert.equal(spawnErrorMessage('ff', { code: 'ENOENT' }), "firstfault: cannot run 'ff': not found; set firstfault.path");
  assert.equal(spawnErrorMessage('ff', new Error('boom')), "firstfault: cannot run 'ff': boom; set firstfault.path");
});

test('findExecutable: PATH lookup and paths', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ff-find-'));
  try {
    const exe = path.join(dir, 'firstfault');
    fs.writeFileSync(exe, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    fs.mkdirSync(path.join(dir, 'adir'));
    assert.equal(findExecutable('firstfault', `/nonexistent${path.delimiter}${dir}`), exe);
    assert.equal(findExecutable('adir', dir), undefined); // a directory is not a program
    assert.equal(findExecutable(exe, ''), exe);
    assert.equal(findExecutable('./firstfault', '', dir), exe);
    assert.equal(findExecutable('firstfault', ''), undefined);
    assert.equal(findExecutable('', dir), undefined);
    assert.equal(findExecutable(path.join(dir, 'nope'), dir), undefined);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

const OOM_LOG = [
  '[rank0]: step 120 loss 2.31',
  '[rank1]: Traceback (most recent call last):',
  '[rank1]:   File "train.py", line 42, in <module>',
  '[rank1]:     loss.backward()',
  '[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.',
  '',
].join('\n');

test('the real firstfault binary (FF_BIN) diagnoses a CUDA OOM from stdin as HTML', async (t) => {
  const bin = process.env.FF_BIN;
  if (!bin) {
    t.skip('FF_BIN is not set: set it to a firstfault binary to run this test (test.sh BIN does)');
    return;
  }
  const cfg = { path: bin, kbDirs: [] };
  const args = diagnoseArgs(cfg);
  assert.deepEqual(args, ['diagnose', '--no-history', '--quiet', '--format', 'html', '-']);
  const r = await runBinary(cfg.path, args, { stdin: OOM_LOG });
  assert.equal(r.status, 1, `status ${r.status}, stderr: ${r.stderr}`);
  assert.deepEqual(interpretExit(r.status, r.stderr), { kind: 'verdict', verdict: 'failure' });
  assert.match(r.stdout, /<html/);
  assert.match(r.stdout, /out of memory/i);
});
