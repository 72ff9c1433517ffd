// firstfault serve in a real headless Chromium: paste a real multi-rank log, upload a bundle, follow the
// evidence link into the log viewer, open an encyclopedia entry, check the CSP header and that the page
// runs under it without violations, and draw the timeline of an 8-, a 16- and a 512-rank job (screenshots kept).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const BIN = process.env.FF_BIN;
const TESTS = process.env.FF_TESTS;
const ART = process.env.FF_ARTIFACTS;
const REPO = process.env.FF_REPO;
const CASE = path.join(TESTS, 'corpus', 'run2-torchrun-uneven-batches-rank3', 'logs');

let server, url, token, browser, work;
const cspErrors = [];

async function waitReady(file, proc, ms = 60000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (existsSync(file)) {
      const t = readFileSync(file, 'utf8').trim();
      if (t) return t;
    }
    if (proc.exitCode !== null) throw new Error(`serve exited with ${proc.exitCode}`);
    await new Promise((r) => setTimeout(r, 50));  // polling for the ready file, not a fixed wait
  }
  throw new Error('serve did not become ready');
}

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'ff-browser-'));
  const ready = path.join(work, 'ready');
  server = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--ready-file', ready, '--history', path.join(work, 'h.db')],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  // the ready file holds the address serve prints: http://127.0.0.1:PORT/?token=TOKEN
  const printed = new URL(await waitReady(ready, server));
  token = printed.searchParams.get('token');
  url = printed.origin + '/';
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

// The address of a page with the token (each test's page is a new browser context, without the cookie yet).
function at(p) {
  const u = new URL(p, url);
  u.searchParams.set('token', token);
  return u.href;
}

async function newPage() {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text()); });
  return page;
}

test('paste a multi-rank console log: verdict, initiating rank, evidence link, timeline lanes', async () => {
  const page = await newPage();
  const resp = await page.goto(at('/'));
  assert.equal(page.url(), url, 'the token is taken out of the address once the cookie is set');
  const csp = resp.headers()['content-security-policy'];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /style-src 'nonce-[0-9a-f]+'/);
  await page.fill('#log', readFileSync(path.join(CASE, 'console.log'), 'utf8'));
  await Promise.all([page.waitForURL(/\/report\/[0-9a-f]+$/), page.click('#submit')]);
  assert.equal(await page.textContent('#verdict'), 'failure');
  assert.equal(await page.textContent('#initiating-rank'), '3');
  // the nonce'd stylesheet applied: the verdict badge is red
  const bg = await page.$eval('#verdict', (e) => getComputedStyle(e).backgroundColor);
  assert.equal(bg, 'rgb(192, 22, 27)');
  const lanes = await page.$$eval('#timeline svg g.lane', (gs) => gs.map((g) => g.getAttribute('data-label')));
  assert.deepEqual(lanes, ['rank 0', 'rank 1', 'rank 2', 'rank 3']);
  assert.equal(await page.$$eval('#timeline g.lane.initiating', (g) => g.length), 1);
  await page.screenshot({ path: path.join(ART, 'report-4-ranks.png'), fullPage: true });
  const link = page.locator('#evidence a.loc').first();
  assert.ok(await link.count() > 0, 'an evidence line links to the log viewer');
  await Promise.all([page.waitForURL(/\/log\?/), link.click()]);
  assert.ok(await page.isVisible('#hit'));
  // the console interleaves four local ranks: the viewer shows rank 3's own lines, every line on request
  assert.match(await page.textContent('#view'), /Lines of local rank 3 only/);
  const shown = await page.textContent('#context');
  assert.ok(!shown.includes('[default0]'), 'lines of other ranks are hidden');
  await page.screenshot({ path: path.join(ART, 'log-viewer.png') });
  await Promise.all([page.waitForURL(/all=1/), page.click('#view a')]);
  assert.ok((await page.textContent('#context')).includes('[default0]'));
  await page.screenshot({ path: path.join(ART, 'log-viewer-every-line.png') });
  await page.close();
});

test('upload a .tar.gz bundle of per-rank files', async () => {
  const bundle = path.join(work, 'job.tar.gz');
  execFileSync('tar', ['-czf', bundle, '-C', CASE, '.']);
  const page = await newPage();
  await page.goto(at('/'));
  await page.setInputFiles('#files', bundle);
  await Promise.all([page.waitForURL(/\/report\/[0-9a-f]+$/), page.click('#submit')]);
  assert.equal(await page.textContent('#verdict'), 'failure');
  assert.equal(await page.textContent('#initiating-rank'), '3');
  assert.equal(await page.textContent('#kind'), 'uneven_batches_collective_hang');
  await page.close();
});

test('without the token: 403 and no page', async () => {
  const page = await newPage();
  const resp = await page.goto(url);
  assert.equal(resp.status(), 403);
  assert.equal(await page.$('#diagnose-form'), null);
  assert.match(await page.textContent('#error'), /access token/);
  await page.close();
});

test('an empty submission is a clear error, not a report', async () => {
  const page = await newPage();
  await page.goto(at('/'));
  await page.click('#submit');
  await page.waitForSelector('#error');
  assert.match(await page.textContent('#error'), /nothing to diagnose/);
  await page.close();
});

test('encyclopedia: search and open an entry', async () => {
  const page = await newPage();
  await page.goto(at('/kb/search?q=fallen+off+the+bus'));
  const first = page.locator('#results a').first();
  await Promise.all([page.waitForURL(/\/kb\/entries\//), first.click()]);
  assert.match(await page.title(), /Xid|bus/i);
  await page.goto(new URL('/kb/nccl.html', url).href);  // the cookie set by the first page
  assert.match(await page.textContent('body'), /NCCL/);
  await page.screenshot({ path: path.join(ART, 'encyclopedia-nccl.png') });
  await page.close();
});

test('timeline at 8, 16 and 512 ranks', { timeout: 180000 }, async () => {
  for (const [ranks, bytes, failure] of [[8, '1M', 'cuda_oom'], [16, '3M', 'cuda_oom'], [512, '6M', 'xid79']]) {
    const out = path.join(work, `c${ranks}.log`);
    execFileSync('python3', [path.join(REPO, 'bench', 'gen_logs.py'), '--out', out, '--ranks', String(ranks), '--total-bytes', bytes,
      '--layout', 'console', '--failure', failure, '--position', 'middle', '--seed', '7'], { stdio: 'ignore', timeout: 120000 });
    const truth = JSON.parse(readFileSync(`${out}.truth.json`, 'utf8'));
    const page = await newPage();
    await page.goto(at('/'));
    await page.setInputFiles('#files', out);
    await Promise.all([page.waitForURL(/\/report\/[0-9a-f]+$/), page.click('#submit')]);
    assert.equal(await page.textContent('#initiating-rank'), String(truth.initiating_rank));
    const n = await page.$$eval('#timeline svg g.lane', (g) => g.length);
    const label = await page.$eval('#timeline svg g.lane.initiating', (g) => g.getAttribute('data-label'));
    assert.equal(label, `rank ${truth.initiating_rank}`, 'the initiating rank has a lane of its own');
    if (ranks <= 16) assert.equal(n, ranks);
    else assert.ok(n >= 3 && n <= 40, `512 ranks fold into a readable number of lanes (got ${n})`);
    const box = await page.$('#timeline');
    await box.screenshot({ path: path.join(ART, `timeline-${ranks}-ranks.png`) });
    await page.close();
  }
});

test('history: a past report opens with its timeline', async () => {
  const page = await newPage();
  await page.goto(at('/history'));
  const first = page.locator('#history a').first();
  assert.ok(await first.count() > 0, 'the diagnoses above were kept');
  await Promise.all([page.waitForURL(/\/history\/\d+$/), first.click()]);
  assert.ok(await page.isVisible('#timeline svg'));
  assert.ok((await page.$$eval('#timeline svg g.lane', (g) => g.length)) > 0);
  assert.match(await page.textContent('#stored'), /verdict/);
  await page.screenshot({ path: path.join(ART, 'history-entry.png'), fullPage: true });
  await page.close();
});

test('no Content-Security-Policy violation on any page', () => {
  assert.deepEqual(cspErrors, []);
});
