'use strict';
// The contract between this extension and `firstfault lsp` (needs FF_BIN): the server started with
// lspArgs, its command list, the firstfault/verdict notification as parseVerdict/statusText read it,
// and the results of firstfault.diagnoseFolder, firstfault.explain and firstfault.copyFix.
const test = require('node:test');
const assert = require('node:assert/strict');
const cp = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const rpc = require('vscode-jsonrpc/node');
const { lspArgs, serverCommandsToRegister } = require('../out/args.js');
const { parseVerdict, statusText, summaryLine } = require('../out/report.js');

const OOM_LOG = [
  '[rank0]: step 120 loss 2.31',
  '[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.',
  '',
].join('\n');

function within(ms, promise, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

test('firstfault lsp speaks the protocol this extension expects', { timeout: 120000 }, async (t) => {
  const bin = process.env.FF_BIN;
  if (!bin) {
    t.skip('FF_BIN is not set: set it to a firstfault binary to run this test (test.sh BIN does)');
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ff-lsp-'));
  const kb = path.join(dir, 'kb');
  const logs = path.join(dir, 'logs');
  fs.mkdirSync(kb);
  fs.mkdirSync(logs);
  const file = path.join(logs, 'rank1.log');
  fs.writeFileSync(file, OOM_LOG);
  const uri = 'file://' + file.split('/').map(encodeURIComponent).join('/');

  // An empty extra knowledge-base directory: the server must accept `lsp --kb DIR`.
  const server = cp.spawn(bin, lspArgs({ path: bin, kbDirs: [kb] }), { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  server.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(server.stdout), new rpc.StreamMessageWriter(server.stdin));
  const verdicts = [];
  let onVerdict = () => undefined;
  conn.onNotification('firstfault/verdict', (params) => {
    verdicts.push(params);
    onVerdict();
  });
  conn.onNotification(() => undefined); // publishDiagnostics and the rest
  conn.listen();
  try {
    const init = await within(30000, conn.sendRequest('initialize', { processId: process.pid, rootUri: null, capabilities: {} }), 'initialize result');
    const commands = init.capabilities.executeCommandProvider && init.capabilities.executeCommandProvider.commands;
    assert.ok(Array.isArray(commands), JSON.stringify(init.capabilities));
    for (const c of ['firstfault.explain', 'firstfault.copyFix']) assert.ok(serverCommandsToRegister(commands).includes(c), c);
    assert.ok(!serverCommandsToRegister(commands).includes('firstfault.diagnoseFolder'));
    conn.sendNotification('initialized', {});

    const got = new Promise((resolve) => {
      onVerdict = () => {
        const v = verdicts.map(parseVerdict).find((x) => x && x.uri === uri);
        if (v) resolve(v);
      };
    });
    conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'log', version: 1, text: OOM_LOG } });
    const v = await within(60000, got, `firstfault/verdict for ${uri}`);
    assert.equal(v.verdict, 'failure');
    assert.equal(v.kind, 'cuda_oom');
    assert.equal(v.initiatingRank, 1);
    assert.equal(statusText(v), '$(error) firstfault: cuda_oom on rank 1');

    const report = await within(60000, conn.sendRequest('workspace/executeCommand', { command: 'firstfault.diagnoseFolder', arguments: [logs] }), 'folder report');
    assert.equal(report.verdict, 'failure');
    assert.match(summaryLine(report), /^firstfault: failure: cuda_oom on rank 1: .*; 1 input/);

    const explained = await within(30000, conn.sendRequest('workspace/executeCommand', { command: 'firstfault.explain', arguments: ['cuda_oom'] }), 'explanation');
    assert.equal(typeof explained.title, 'string');
    assert.equal(typeof explained.markdown, 'string');
    assert.ok(explained.markdown.length > 0);

    const fix = await within(30000, conn.sendRequest('workspace/executeCommand', { command: 'firstfault.copyFix', arguments: [uri] }), 'fix text');
    assert.equal(typeof fix.text, 'string');
    assert.ok(fix.text.trim().length > 0);

    await within(30000, conn.sendRequest('shutdown'), 'shutdown result');
    conn.sendNotification('exit');
    const end = await within(30000, exited, 'server exit');
    assert.deepEqual(end, { code: 0, signal: null }, stderr);
  } finally {
    conn.dispose();
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
