'use strict';
// The escape stripper, the bounded accumulator and the command recorder (out/terminal.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const { stripEscapes, OutputAccumulator, CommandRecorder, utf8Tail, DEFAULT_OUTPUT_CAP } = require('../out/terminal.js');

const ESC = '\x1b';
const BEL = '\x07';
const ST = ESC + '\\';

const stripCases = [
  { name: 'plain text is unchanged', in: 'line 1\nline 2\r\n\ttabbed', want: 'line 1\nline 2\r\n\ttabbed' },
  { name: 'CSI colours', in: `${ESC}[31mERROR${ESC}[0m: ${ESC}[1;33mwarn${ESC}[m`, want: 'ERROR: warn' },
  { name: 'CSI 256 and truecolour', in: `${ESC}[38;5;196mred${ESC}[38;2;255;0;0mred${ESC}[0m`, want: 'redred' },
  { name: 'CSI cursor and erase', in: `progress 10%${ESC}[2K${ESC}[1Gprogress 20%${ESC}[?25h`, want: 'progress 10%progress 20%' },
  { name: 'CSI with an intermediate byte', in: `a${ESC}[2 qb`, want: 'ab' },
  { name: 'OSC 633;A with BEL', in: `${ESC}]633;A${BEL}prompt$ `, want: 'prompt$ ' },
  { name: 'OSC 633;B with ST', in: `$ ${ESC}]633;B${ST}torchrun train.py`, want: '$ torchrun train.py' },
  {
    name: 'OSC 633;C and ;D around output, both terminators',
    in: `${ESC}]633;E;torchrun train.py;abc${BEL}${ESC}]633;C${BEL}[rank1]: boom\n${ESC}]633;D;1${ST}`,
    want: '[rank1]: boom\n',
  },
  { name: 'a whole shell-integration prompt', in: `${ESC}]633;P;Cwd=/home/u${BEL}${ESC}]633;A${BEL}u@h:~$ ${ESC}]633;B${BEL}`, want: 'u@h:~$ ' },
  { name: 'OSC 0 window title', in: `${ESC}]0;user@host: ~${BEL}text`, want: 'text' },
  { name: 'OSC 8 hyperlink', in: `${ESC}]8;;https://example.invalid${ST}link${ESC}]8;;${ST}`, want: 'link' },
  { name: 'an OSC cut off at the end', in: `out\n${ESC}]633;D;`, want: 'out\n' },
  { name: 'an OSC cut off by another escape', in: `${ESC}]633;A${ESC}[31mred`, want: 'red' },
  { name: 'DCS with ST', in: `a${ESC}Pq#0;2;0;0;0${ST}b`, want: 'ab' },
  { name: 'charset and keypad escapes', in: `${ESC}(Ba${ESC}=b${ESC}7c${ESC}8${ESC}M`, want: 'abc' },
  { name: 'a bare ESC at the end', in: `text${ESC}`, want: 'text' },
  { name: 'a bare ESC before a newline', in: `a${ESC}\nb`, want: 'a\nb' },
  { name: 'a lone ESC alone', in: ESC, want: '' },
  { name: '8-bit CSI and OSC', in: `\x9b31mred\x9b0m \x9d633;A\x07ok`, want: 'red ok' },
  { name: 'stray BEL, backspace and NUL go', in: `a${BEL}b\x08c\x00d`, want: 'abcd' },
  { name: 'non-ASCII text stays', in: `${ESC}[1mµs ✓ 失败${ESC}[0m`, want: 'µs ✓ 失败' },
];
for (const c of stripCases) {
  test(`stripEscapes: ${c.name}`, () => assert.equal(stripEscapes(c.in), c.want));
}

test('stripEscapes: a real torchrun error line survives colouring and marks', () => {
  const line = '[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.';
  const raw = `${ESC}]633;C${BEL}${ESC}[31m${line}${ESC}[0m\r\n${ESC}]633;D;1${BEL}`;
  assert.equal(stripEscapes(raw), line + '\r\n');
});

test('OutputAccumulator: under the cap keeps everything', () => {
  const a = new OutputAccumulator(100);
  a.append('hello ');
  a.append('');
  a.append('world');
  assert.equal(a.text(), 'hello world');
  assert.equal(a.byteLength, 11);
  assert.equal(a.truncated, false);
  assert.equal(a.dropped, 0);
});

test('OutputAccumulator: writes past the cap keep the newest bytes', () => {
  const a = new OutputAccumulator(10);
  a.append('0123456789');
  assert.equal(a.text(), '0123456789');
  a.append('abc');
  assert.equal(a.text(), '3456789abc');
  assert.equal(a.byteLength, 10);
  assert.equal(a.dropped, 3);
  assert.equal(a.truncated, true);
  a.append('defghijklmnop'); // one chunk larger than the cap
  assert.equal(a.text(), 'ghijklmnop');
  assert.equal(a.byteLength, 10);
  assert.equal(a.dropped, 16);
});

test('OutputAccumulator: many small writes stay bounded', () => {
  const a = new OutputAccumulator(1000);
  let all = '';
  for (let i = 0; i < 10000; i++) {
    const s = `${i},`;
    a.append(s);
    all += s;
  }
  assert.equal(a.byteLength, 1000);
  assert.equal(a.text(), all.slice(-1000));
  assert.equal(a.dropped, Buffer.byteLength(all) - 1000);
});

test('OutputAccumulator: a cut never splits a character', () => {
  const a = new OutputAccumulator(5);
  a.append('ab€€'); // € is 3 bytes in UTF-8: 8 bytes in all
  assert.equal(a.text(), '€'); // the last 5 bytes start inside the first €; the cut moves to the next character
  assert.equal(a.byteLength, 3);
  assert.ok(!a.text().includes('\ufffd'));
  assert.deepEqual(utf8Tail('x€', 2), { text: '', bytes: 0 });
  assert.deepEqual(utf8Tail('x€', 3), { text: '€', bytes: 3 });
  assert.deepEqual(utf8Tail('x€', 9), { text: 'x€', bytes: 4 });
});

test('OutputAccumulator: the default cap is 64 MiB, clear() empties', () => {
  assert.equal(DEFAULT_OUTPUT_CAP, 64 * 1024 * 1024);
  const a = new OutputAccumulator();
  assert.equal(a.capBytes, DEFAULT_OUTPUT_CAP);
  a.append('x');
  a.clear();
  assert.equal(a.text(), '');
  assert.equal(a.byteLength, 0);
  assert.throws(() => new OutputAccumulator(-1), RangeError);
});

test('CommandRecorder: the last finished command of each terminal', () => {
  const rec = new CommandRecorder(1024);
  const t1 = {}, t2 = {};
  const e1 = {}, e2 = {}, e3 = {};
  assert.equal(rec.finished(t1), undefined);
  const c1 = rec.start(t1, e1, 'python train.py');
  c1.output.append('[rank1]: boom\n');
  assert.equal(rec.running(t1), c1);
  assert.equal(rec.finished(t1), undefined);
  rec.end(e1, 'torchrun --nproc 8 train.py', 1);
  assert.equal(rec.running(t1), undefined);
  assert.equal(rec.finished(t1).commandLine, 'torchrun --nproc 8 train.py');
  assert.equal(rec.finished(t1).exitCode, 1);
  assert.equal(rec.finished(t1).output.text(), '[rank1]: boom\n');

  // A new command runs: the finished one stays until the new one ends.
  const c2 = rec.start(t1, e2, 'ls');
  c2.output.append('a b c\n');
  assert.equal(rec.finished(t1), c1);
  rec.end(e2, '', 0); // an empty command line keeps the one from the start
  assert.equal(rec.finished(t1), c2);
  assert.equal(rec.finished(t1).commandLine, 'ls');

  // Another terminal is separate.
  rec.start(t2, e3, 'make');
  assert.equal(rec.finished(t2), undefined);
  rec.end(e3, undefined, undefined);
  assert.equal(rec.finished(t2).exitCode, undefined);
  assert.equal(rec.finished(t1), c2);

  rec.forget(t1);
  assert.equal(rec.finished(t1), undefined);
  assert.equal(rec.end({}, 'x', 0), undefined); // an unknown execution
});

test('CommandRecorder: an end that arrives after the next start', () => {
  const rec = new CommandRecorder(1024);
  const t = {}, e1 = {}, e2 = {}, e3 = {};
  const c1 = rec.start(t, e1, 'first');
  const c2 = rec.start(t, e2, 'second');
  rec.end(e2, 'second', 0);
  rec.end(e1, 'first', 1); // late: the newer finished command stays the last one
  assert.equal(rec.finished(t), c2);
  assert.equal(c1.finished, true);
  // Only the previous unfinished command stays open: one two starts back is dropped.
  rec.start(t, {}, 'a');
  rec.start(t, {}, 'b');
  rec.start(t, e3, 'c');
  rec.end(e3, 'c', 0);
  assert.equal(rec.finished(t).commandLine, 'c');
});

test('CommandRecorder: each command output is bounded', () => {
  const rec = new CommandRecorder(8);
  const t = {}, e = {};
  const c = rec.start(t, e, 'yes');
  for (let i = 0; i < 100; i++) c.output.append('y\n');
  rec.end(e, 'yes', 130);
  assert.equal(rec.finished(t).output.text(), 'y\ny\ny\ny\n');
});
