// The VS Code extension (editors/vscode) in a real VS Code: code-server 4.139 ("Code 1.139") on 127.0.0.1,
// the packaged .vsix installed offline, a copy of a real corpus log opened from the Explorer in headless
// Chromium. Checks that the extension starts `firstfault lsp` and that its diagnostics reach the editor: the
// Problems count, the root cause's row in the Problems panel, the verdict in the status bar, and the hover.
// Every wait is a bounded wait for a condition; screenshots go to FF_ARTIFACTS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const BIN = process.env.FF_BIN;
const VSIX = process.env.FF_VSIX;
const ART = process.env.FF_ARTIFACTS;
const LOG = path.join(process.env.FF_TESTS, 'corpus', 'gh-funasr-2006', 'logs', 'pasted.log');
const CODE_SERVER = path.resolve('node_modules/.bin/code-server');
const DIAGNOSIS_MS = 180000;  // the first diagnosis may compile the knowledge base on a loaded machine

let work, server, browser, page;
let serverLog = '';

// code-server's own paths, all inside the scratch directory (XDG_CONFIG_HOME: else it writes ~/.config).
function codeServerArgs() {
  return ['--user-data-dir', path.join(work, 'data'), '--extensions-dir', path.join(work, 'ext')];
}
const codeServerEnv = () => ({ ...process.env, XDG_CONFIG_HOME: path.join(work, 'config'), XDG_DATA_HOME: path.join(work, 'xdg-data') });

// The address code-server prints once it listens (port 0: the system picks a free one).
function listening(proc, ms = 60000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`code-server did not listen within ${ms} ms:\n${serverLog}`)), ms);
    const seen = (chunk) => {
      serverLog += chunk;
      const m = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+)\//.exec(serverLog);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    proc.stdout.on('data', seen);
    proc.stderr.on('data', seen);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`code-server exited with ${code}:\n${serverLog}`)); });
  });
}

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'ff-code-server-'));
  const folder = path.join(work, 'job');
  mkdirSync(folder);
  copyFileSync(LOG, path.join(folder, 'pasted.log'));
  // Without these the folder opens in Restricted Mode (no extension runs) behind a welcome page.
  const settings = JSON.stringify({
    'security.workspace.trust.enabled': false,
    'workbench.startupEditor': 'none',
    'chat.disableAIFeatures': true,
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'firstfault.path': BIN,
  });
  // firstfault.path is machine-overridable: code-server's extension host may read the machine's settings
  // before the user's reach it (one run in two said "cannot run 'firstfault'"), so both hold it.
  for (const dir of ['User', 'Machine']) {
    mkdirSync(path.join(work, 'data', dir), { recursive: true });
    writeFileSync(path.join(work, 'data', dir, 'settings.json'), settings);
  }
  execFileSync(CODE_SERVER, [...codeServerArgs(), '--install-extension', VSIX], { env: codeServerEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
  server = spawn(CODE_SERVER, [...codeServerArgs(), '--bind-addr', '127.0.0.1:0', '--auth', 'none', '--disable-telemetry',
    '--disable-update-check', '--disable-workspace-trust', folder], { env: codeServerEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  const origin = await listening(server);
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(`${origin}/?folder=${encodeURIComponent(folder)}`);
  await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
});

after(async () => {
  if (page && ART) await page.screenshot({ path: path.join(ART, 'code-server.png') }).catch(() => {});
  if (browser) await browser.close();
  if (server && server.exitCode === null) server.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the extension attaches firstfault lsp to a log opened in VS Code: problems, status bar, hover', async () => {
  // Open the log from the Explorer, as a user would.
  const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'pasted.log' });
  await row.waitFor({ timeout: 60000 });
  await row.click();
  await page.locator('.monaco-editor .view-lines').first().waitFor({ timeout: 30000 });

  // The Problems count in the status bar: one Error (the OOM line).
  const problems = page.locator('[id="status.problems"]');
  await page.waitForFunction(() => {
    const e = document.querySelector('[id="status.problems"]');
    return e && /Errors?:\s*[1-9]/.test(e.getAttribute('aria-label') || '');
  }, null, { timeout: DIAGNOSIS_MS });
  const label = await problems.getAttribute('aria-label');
  assert.match(label, /Errors?:\s*1\b/, label);

  // The verdict the extension shows (the server's firstfault/verdict notification).
  const status = page.locator('[id="firstfault.firstfault.verdict"], .statusbar-item', { hasText: 'firstfault: cuda_oom' });
  await status.first().waitFor({ timeout: 30000 });
  assert.match(await status.first().innerText(), /firstfault: cuda_oom on rank 2/);

  // The Problems panel's Error row: the root cause, from firstfault, with its signature.
  await page.keyboard.press('Control+Shift+M');
  const markers = page.locator('.markers-panel .monaco-list-row');
  await markers.first().waitFor({ timeout: 30000 });
  const rows = await markers.allInnerTexts();
  const root = rows.find((t) => t.includes('root cause:'));
  assert.ok(root, `no root-cause row in the Problems panel:\n${rows.join('\n')}`);
  assert.match(root, /rank 2/);
  assert.match(root, /firstfault/);
  if (ART) await page.screenshot({ path: path.join(ART, 'code-server-problems.png') });

  // The hover on the Error's line, with the mouse as a user would: the short form (verdict, fix, link).
  await page.keyboard.press('Control+Shift+M');  // the panel away again: the whole editor is free
  const line = page.locator('.monaco-editor .view-line', { hasText: 'OutOfMemoryError' }).first();
  await line.hover({ position: { x: 60, y: 5 } });
  const hover = page.locator('.monaco-hover', { hasText: 'Full entry' });
  await hover.first().waitFor({ timeout: 30000 });
  const text = await hover.first().innerText();
  assert.match(text, /root cause: CUDA out of memory/);
  assert.match(text, /Fix/);
  assert.match(text, /firstfault explain cuda_oom/);
  const href = await hover.first().locator('a', { hasText: 'Full entry' }).getAttribute('data-href') ??
    await hover.first().locator('a', { hasText: 'Full entry' }).getAttribute('href');
  assert.match(href ?? '', /kb\/cuda\/cuda_oom\.yaml$/);
  if (ART) await page.screenshot({ path: path.join(ART, 'code-server-hover.png') });
});
