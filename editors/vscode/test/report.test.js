'use strict';
// Webview pages, status-bar text, the folder summary and exit statuses (out/report.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const r = require('../out/report.js');

const META = `<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;; style-src &#39;unsafe-inline&#39;; img-src data:">`;

const cspCases = [
  {
    name: 'inserted first in <head>',
    html: '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>t</title></head><body>x</body></html>',
    want: '<!doctype html>\n<html lang="en"><head>' + META + '<meta charset="utf-8"><title>t</title></head><body>x</body></html>',
  },
  {
    name: '<head> with attributes, upper case',
    html: '<HTML><HEAD data-x="1"><TITLE>t</TITLE></HEAD><BODY></BODY></HTML>',
    want: '<HTML><HEAD data-x="1">' + META + '<TITLE>t</TITLE></HEAD><BODY></BODY></HTML>',
  },
  { name: 'no <head>: one made after <html>', html: '<html><body>x</body></html>', want: '<html><head>' + META + '</head><body>x</body></html>' },
  { name: 'a fragment: the tag goes first', html: '<p>x</p>', want: META + '<p>x</p>' },
  { name: 'doctype only: after the doctype', html: '<!DOCTYPE html><p>x</p>', want: '<!DOCTYPE html>' + META + '<p>x</p>' },
  {
    name: 'a page with its own policy is unchanged',
    html: `<html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'"></head></html>`,
    want: `<html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'"></head></html>`,
  },
  {
    name: 'its own policy, other spelling and quotes',
    html: `<head><meta content="default-src 'none'" http-equiv='content-security-policy'></head>`,
    want: `<head><meta content="default-src 'none'" http-equiv='content-security-policy'></head>`,
  },
  {
    name: 'its own policy without quotes',
    html: `<head><meta http-equiv=Content-Security-Policy content="default-src 'none'"></head>`,
    want: `<head><meta http-equiv=Content-Security-Policy content="default-src 'none'"></head>`,
  },
];
for (const c of cspCases) {
  test(`ensureCsp: ${c.name}`, () => {
    const got = r.ensureCsp(c.html);
    assert.equal(got, c.want);
    assert.ok(r.hasCspMeta(got));
  });
}

test('ensureCsp: the policy is the default one', () => {
  assert.equal(r.DEFAULT_CSP, "default-src 'none'; style-src 'unsafe-inline'; img-src data:");
});

test('escapeHtml and preformattedPage escape markup', () => {
  assert.equal(r.escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  const page = r.preformattedPage('t<1>', '<script>alert(1)</script>');
  assert.ok(r.hasCspMeta(page));
  assert.ok(!page.includes('<script>'));
  assert.ok(page.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  assert.ok(page.includes('<title>t&lt;1&gt;</title>'));
});

const base = { uri: 'file:///logs/a.log', kind: '', title: '', initiatingRank: null, initiatingHost: null };
const statusCases = [
  { name: 'failure with kind and rank', v: { ...base, verdict: 'failure', kind: 'cuda_oom', title: 'CUDA out of memory', initiatingRank: 3 }, want: '$(error) firstfault: cuda_oom on rank 3' },
  { name: 'failure on rank 0', v: { ...base, verdict: 'failure', kind: 'nccl_timeout', initiatingRank: 0, initiatingHost: 'node-1' }, want: '$(error) firstfault: nccl_timeout on rank 0' },
  { name: 'failure with a host only', v: { ...base, verdict: 'failure', kind: 'ecc_error', initiatingHost: 'gpu-node-7' }, want: '$(error) firstfault: ecc_error on gpu-node-7' },
  { name: 'failure with neither', v: { ...base, verdict: 'failure', kind: 'segfault' }, want: '$(error) firstfault: segfault' },
  { name: 'failure without a kind uses the title', v: { ...base, verdict: 'failure', title: 'Killed' }, want: '$(error) firstfault: Killed' },
  { name: 'failure with nothing', v: { ...base, verdict: 'failure' }, want: '$(error) firstfault: failure' },
  { name: 'a kind cannot add an icon', v: { ...base, verdict: 'failure', kind: '$(check) x' }, want: '$(error) firstfault: $ (check) x' },
  { name: 'undetermined', v: { ...base, verdict: 'undetermined', kind: 'whatever', initiatingRank: 2 }, want: '$(warning) firstfault: undetermined' },
  { name: 'healthy', v: { ...base, verdict: 'healthy' }, want: '$(check) firstfault: healthy' },
];
for (const c of statusCases) {
  test(`statusText: ${c.name}`, () => {
    assert.equal(r.statusText(c.v), c.want);
    assert.match(r.statusTooltip(c.v), /Click for the full report$/);
  });
}

test('statusText: a long kind is cut', () => {
  const got = r.statusText({ ...base, verdict: 'failure', kind: 'k'.repeat(200), initiatingRank: 1 });
  assert.ok(got.length < 100, got);
  assert.ok(got.endsWith('… on rank 1'));
});

const verdictCases = [
  { name: 'full', params: { uri: 'file:///a.log', verdict: 'failure', kind: 'cuda_oom', title: 'T', initiatingRank: 3, initiatingHost: 'h' }, want: { uri: 'file:///a.log', verdict: 'failure', kind: 'cuda_oom', title: 'T', initiatingRank: 3, initiatingHost: 'h' } },
  { name: 'nulls and missing fields', params: { uri: 'file:///a.log', verdict: 'healthy', initiatingRank: null }, want: { uri: 'file:///a.log', verdict: 'healthy', kind: '', title: '', initiatingRank: null, initiatingHost: null } },
  { name: 'bad rank and empty host', params: { uri: 'u', verdict: 'undetermined', initiatingRank: -1, initiatingHost: '' }, want: { uri: 'u', verdict: 'undetermined', kind: '', title: '', initiatingRank: null, initiatingHost: null } },
  { name: 'unknown verdict', params: { uri: 'u', verdict: 'maybe' }, want: undefined },
  { name: 'no uri', params: { verdict: 'healthy' }, want: undefined },
  { name: 'not an object', params: 'healthy', want: undefined },
  { name: 'null', params: null, want: undefined },
];
for (const c of verdictCases) {
  test(`parseVerdict: ${c.name}`, () => assert.deepEqual(r.parseVerdict(c.params), c.want));
}

const summaryCases = [
  {
    name: 'a failure',
    report: { schema: 'firstfault.report/v1', verdict: 'failure', root_cause: { kind: 'cuda_oom', title: 'CUDA out of memory' }, initiating_rank: 3, initiating_host: 'node-2', inputs: [{}, {}], input_errors: [], collateral: [{}] },
    want: 'firstfault: failure: cuda_oom on rank 3 (host node-2): CUDA out of memory; 2 inputs, 1 collateral group',
  },
  { name: 'healthy', report: { verdict: 'healthy', root_cause: null, initiating_rank: null, initiating_host: null, inputs: [{}] }, want: 'firstfault: healthy; 1 input' },
  { name: 'undetermined with unreadable inputs', report: { verdict: 'undetermined', root_cause: null, inputs: [{}, {}, {}], input_errors: [{}] }, want: 'firstfault: undetermined; 3 inputs, 1 unreadable input' },
  { name: 'host but no rank', report: { verdict: 'failure', root_cause: { kind: 'xid_79' }, initiating_rank: null, initiating_host: 'h1' }, want: 'firstfault: failure: xid_79 on h1' },
  { name: 'a title without a kind', report: { verdict: 'failure', root_cause: { title: 'Killed' } }, want: 'firstfault: failure: Killed' },
  { name: 'signature when there is no kind', report: { verdict: 'failure', root_cause: { signature: 'torch.cuda_oom' } }, want: 'firstfault: failure: torch.cuda_oom' },
  { name: 'wrong types are left out', report: { verdict: 7, root_cause: 'x', initiating_rank: '3', inputs: [] }, want: 'firstfault: 0 inputs' },
  { name: 'unknown keys are named', report: { foo: 1, bar: 2 }, want: 'firstfault: report with foo, bar' },
  { name: 'empty object', report: {}, want: 'firstfault: the report is empty' },
  { name: 'null', report: null, want: 'firstfault: the server returned no report' },
  { name: 'an array', report: [1], want: 'firstfault: the server returned an array, not a report' },
  { name: 'a string', report: 'x', want: 'firstfault: the server returned string, not a report' },
];
for (const c of summaryCases) {
  test(`summaryLine: ${c.name}`, () => assert.equal(r.summaryLine(c.report), c.want));
}

const exitCases = [
  { status: 0, stderr: '', want: { kind: 'verdict', verdict: 'healthy' } },
  { status: 1, stderr: 'a note\n', want: { kind: 'verdict', verdict: 'failure' } },
  { status: 3, stderr: '', want: { kind: 'verdict', verdict: 'undetermined' } },
  { status: 2, stderr: "firstfault: unknown option '--x'\nmore\n", want: { kind: 'error', message: "firstfault: unknown option '--x'" } },
  { status: 2, stderr: '\n  \nRun with --help for more information.\n', want: { kind: 'error', message: 'firstfault: Run with --help for more information.' } },
  { status: 4, stderr: '', want: { kind: 'error', message: 'firstfault: exit status 4 (engine failure)' } },
  { status: 5, stderr: 'firstfault: knowledge base: /kb/x.yaml: bad regex\r\n', want: { kind: 'error', message: 'firstfault: knowledge base: /kb/x.yaml: bad regex' } },
  { status: 2, stderr: '', want: { kind: 'error', message: 'firstfault: exit status 2 (bad usage or input)' } },
  { status: 127, stderr: '', want: { kind: 'error', message: 'firstfault: exit status 127' } },
  { status: null, stderr: '', signal: 'SIGKILL', want: { kind: 'error', message: 'firstfault: the process was ended by SIGKILL' } },
];
for (const [i, c] of exitCases.entries()) {
  test(`interpretExit #${i + 1}: status ${c.status}${c.stderr ? ` with stderr ${JSON.stringify(c.stderr.slice(0, 24))}` : ''}`, () => assert.deepEqual(r.interpretExit(c.status, c.stderr, c.signal), c.want));
}
