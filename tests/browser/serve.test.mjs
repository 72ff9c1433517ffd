// firstfault serve in a real headless Chromium: paste a real multi-rank log, upload a bundle, drop files and a
// folder onto the form, try the sample log, follow the evidence link into the log viewer, open an encyclopedia
// entry, check the CSP header and that the page runs under it without violations, check that every page fits
// a 400 px and a 1,400 px window, and draw the timeline of an 8-, a 16- and a 512-rank job (screenshots kept).
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

async function newPage(width = 1280) {
  const page = await browser.newPage({ viewport: { width, height: 1000 } });
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

// Drags `files` (paths on this machine) onto the point (x, y) of the page and drops them there, as the
// browser does for a drag from the desktop (DevTools' Input.dispatchDragEvent: the page sees a trusted drag,
// and what takes the drop is the browser's own handling of the element under the point, no script).
async function dropFiles(page, files, x, y) {
  const cdp = await page.context().newCDPSession(page);
  const data = { items: [], files, dragOperationsMask: 1 };  // 1: copy
  for (const type of ['dragEnter', 'dragOver', 'drop']) await cdp.send('Input.dispatchDragEvent', { type, x, y, data });
  await cdp.detach();
}

async function centre(page, selector) {
  const b = await page.locator(selector).first().boundingBox();
  return [b.x + b.width / 2, b.y + b.height / 2];
}

async function chosen(page, selector, min = 1) {
  for (const until = Date.now() + 10000; Date.now() < until;) {  // a dropped folder is listed asynchronously
    const names = await page.$eval(selector, (e) => [...e.files].map((f) => f.webkitRelativePath || f.name));
    if (names.length >= min) return names.sort();
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

test('drop files onto the files box, on its label: they are chosen and diagnosed', async () => {
  const page = await newPage();
  await page.goto(at('/'));
  const files = ['console.log'].map((f) => path.join(CASE, f));
  const [x, y] = await centre(page, 'label:has(#files) .drop-say');  // the words laid over the box take no pointer
  await dropFiles(page, files, x, y);
  assert.deepEqual(await chosen(page, '#files'), ['console.log']);
  // it is the input that takes the drop: the folder box next to it still has nothing
  assert.equal(await page.$eval('#dir', (e) => e.files.length), 0);
  await page.screenshot({ path: path.join(ART, 'start-files-dropped.png') });
  await Promise.all([page.waitForURL(/\/report\/[0-9a-f]+$/), page.click('#submit')]);
  assert.equal(await page.textContent('#initiating-rank'), '3');
  await page.close();
});

test('drop a folder onto the folder box: its files are chosen with their paths and diagnosed', async () => {
  const folder = path.join(work, 'job');
  execFileSync('cp', ['-r', CASE, folder]);
  const expected = execFileSync('find', ['.', '-type', 'f'], { cwd: folder, encoding: 'utf8' }).trim().split('\n')
    .map((f) => 'job/' + f.slice(2)).sort();
  const page = await newPage();
  await page.goto(at('/'));
  await dropFiles(page, [folder], ...(await centre(page, '#dir')));
  assert.deepEqual(await chosen(page, '#dir', expected.length), expected);
  await Promise.all([page.waitForURL(/\/report\/[0-9a-f]+$/), page.click('#submit')]);
  assert.equal(await page.textContent('#kind'), 'uneven_batches_collective_hang');
  assert.equal(await page.textContent('#initiating-rank'), '3');
  await page.close();
});

test('the sample log: one click gives a report naming cuda_oom on rank 2', async () => {
  const page = await newPage();
  await page.goto(at('/'));
  await Promise.all([page.waitForURL(/\/report\/[0-9a-f]+$/), page.click('#sample')]);
  assert.equal(await page.textContent('#verdict'), 'failure');
  assert.equal(await page.textContent('#kind'), 'cuda_oom');
  assert.equal(await page.textContent('#initiating-rank'), '2');
  await page.close();
});

test('the favicon: an image, without the token', async () => {
  const ctx = await browser.newContext();  // no cookie
  const r = await ctx.request.get(new URL('/favicon.ico', url).href);
  assert.equal(r.status(), 200);
  assert.match(r.headers()['content-type'], /^image\//);
  assert.deepEqual([...(await r.body()).subarray(0, 4)], [0, 0, 1, 0], 'an ICO header');
  await ctx.close();
});

// Every page at 400 and 1,400 px: nothing wider than the window (the body never scrolls sideways; a wide
// table or the timeline scrolls in its own box), and at 1,400 px no table is cut off in its box.
test('every page fits a 400 px and a 1,400 px window', { timeout: 120000 }, async () => {
  const first = await newPage();
  await first.goto(at('/'));
  await Promise.all([first.waitForURL(/\/report\/[0-9a-f]+$/), first.click('#sample')]);
  const report = new URL(first.url()).pathname;
  const viewer = new URL(await first.locator('#evidence a.loc').first().getAttribute('href'), url);
  await first.close();
  const pages = [['start', '/'], ['report', report], ['log-viewer', viewer.pathname + viewer.search], ['kb-index', '/kb/index.html'],
    ['kb-entry', '/kb/entries/nccl_shm_dev_shm_full.html'], ['kb-nccl', '/kb/nccl.html'], ['kb-search', '/kb/search?q=nccl'],
    ['history', '/history']];
  const widths = {};
  for (const width of [400, 1400]) {
    const page = await newPage(width);
    for (const [name, where] of pages) {
      await page.goto(at(where));
      const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      widths[`${name}@${width}`] = scroll;
      assert.ok(scroll <= inner, `${name} at ${width} px is ${scroll} px wide`);
      // the app's frame on every page, the encyclopedia's included
      assert.ok(await page.$('nav.top a[href="/history"]'), `${name} has the app's navigation`);
      if (width === 1400) {
        const cut = await page.$$eval('.table-box', (bs) => bs.filter((b) => b.scrollWidth > b.clientWidth).length);
        assert.equal(cut, 0, `${name}: a table is cut off at 1,400 px`);
      }
      await page.screenshot({ path: path.join(ART, `${name}-${width}.png`), fullPage: true });
    }
    await page.close();
  }
  console.log('scrollWidth per page:', JSON.stringify(widths));
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
