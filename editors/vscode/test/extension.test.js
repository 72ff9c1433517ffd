'use strict';
// out/extension.js driven through activate() with a stand-in for the `vscode` module (below): the
// commands it registers, the terminal capture, the report panel, error messages, and (with FF_BIN) the
// real language client against `firstfault lsp`: verdict in the status bar, explain, copy fix, folder.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const Module = require('node:module');
const { minimatch } = require('minimatch');

// ---- A small fake of the VS Code API: what the extension and vscode-languageclient use ----

class Disposable {
  constructor(fn) {
    this.fn = fn;
  }
  static from(...ds) {
    return new Disposable(() => ds.forEach((d) => d && d.dispose && d.dispose()));
  }
  dispose() {
    if (this.fn) this.fn();
    this.fn = undefined;
  }
}

class EventEmitter {
  constructor() {
    this.listeners = new Set();
    this.event = (fn, thisArg) => {
      const l = thisArg ? fn.bind(thisArg) : fn;
      this.listeners.add(l);
      return new Disposable(() => this.listeners.delete(l));
    };
  }
  fire(e) {
    for (const l of [...this.listeners]) l(e);
  }
  dispose() {
    this.listeners.clear();
  }
}

class Uri {
  constructor(scheme, authority, p, query, fragment) {
    Object.assign(this, { scheme, authority: authority || '', path: p || '', query: query || '', fragment: fragment || '' });
  }
  static parse(s) {
    const m = /^([a-zA-Z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(s);
    if (!m) throw new Error(`bad uri ${s}`);
    return new Uri(m[1], m[2], decodeURIComponent(m[3]), m[4], m[5]);
  }
  static file(p) {
    return new Uri('file', '', p);
  }
  get fsPath() {
    return this.path;
  }
  with(change) {
    return new Uri(change.scheme ?? this.scheme, change.authority ?? this.authority, change.path ?? this.path, change.query ?? this.query, change.fragment ?? this.fragment);
  }
  toString() {
    const enc = this.path.split('/').map(encodeURIComponent).join('/');
    return `${this.scheme}:${this.scheme === 'file' || this.authority ? '//' + this.authority : ''}${enc}${this.query ? '?' + this.query : ''}${this.fragment ? '#' + this.fragment : ''}`;
  }
  toJSON() {
    return this.toString();
  }
}

class CancellationTokenSource {
  constructor() {
    const emitter = new EventEmitter();
    this.emitter = emitter;
    this.token = { isCancellationRequested: false, onCancellationRequested: emitter.event };
  }
  cancel() {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose() {}
}

/** A generic class for the value types the client converts to (Range, Diagnostic, ...). */
function valueClass(name) {
  return class {
    constructor(...args) {
      this.kind = name;
      this.args = args;
    }
  };
}

function makeDocument(uri, languageId, text) {
  return {
    uri,
    languageId,
    version: 1,
    isClosed: false,
    isUntitled: uri.scheme === 'untitled',
    fileName: uri.fsPath,
    getText: (range) => (range ? text.slice(range.startOffset, range.endOffset) : text),
    lineCount: text.split('\n').length,
    eol: 1,
  };
}

function makeFake() {
  const events = {};
  const ev = (name) => (events[name] = events[name] || new EventEmitter()).event;
  const fire = (name, e) => events[name] && events[name].fire(e);
  const state = {
    config: { path: 'firstfault', kbDirs: [], 'trace.server': 'off' },
    commands: new Map(),
    messages: [],
    panels: [],
    clipboard: '',
    statusItems: [],
    activeTextEditor: undefined,
    activeTerminal: undefined,
    textDocuments: [],
    output: [],
    nextPick: undefined,
  };
  const message = (level) => (text, ...items) => {
    state.messages.push({ level, text: String(text), items: items.filter((i) => typeof i === 'string') });
    if (state.onMessage) state.onMessage(state.messages[state.messages.length - 1]);
    return Promise.resolve(state.nextPick);
  };
  const vscode = {
    version: '1.93.0',
    Uri,
    Disposable,
    EventEmitter,
    CancellationTokenSource,
    CancellationError: class extends Error {},
    ThemeColor: valueClass('ThemeColor'),
    StatusBarAlignment: { Left: 1, Right: 2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    ViewColumn: { Active: -1, Beside: -2, One: 1 },
    DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
    DiagnosticTag: { Unnecessary: 1, Deprecated: 2 },
    NotebookCellKind: { Markup: 1, Code: 2 },
    EndOfLine: { LF: 1, CRLF: 2 },
    TabInputText: valueClass('TabInputText'),
    TabInputTextDiff: valueClass('TabInputTextDiff'),
    TabInputCustom: valueClass('TabInputCustom'),
    env: {
      appName: 'fake',
      language: 'en',
      clipboard: {
        writeText: async (t) => {
          state.clipboard = t;
        },
      },
      openExternal: async () => true,
    },
    commands: {
      registerCommand(id, fn) {
        if (state.commands.has(id)) throw new Error(`command '${id}' already exists`);
        state.commands.set(id, fn);
        return new Disposable(() => state.commands.delete(id));
      },
      async executeCommand(id, ...args) {
        if (id === 'markdown.api.render') return `<p>${String(args[0]).replace(/</g, '&lt;')}</p>`;
        const fn = state.commands.get(id);
        if (!fn) return undefined;
        return fn(...args);
      },
    },
    window: {
      createOutputChannel: (name) => ({
        name,
        append: (s) => state.output.push(s),
        appendLine: (s) => state.output.push(s + '\n'),
        replace() {},
        clear() {},
        show() {},
        hide() {},
        dispose() {},
      }),
      createStatusBarItem(id) {
        const item = { id, text: '', tooltip: '', command: undefined, visible: false, show() { this.visible = true; }, hide() { this.visible = false; }, dispose() {} };
        state.statusItems.push(item);
        return item;
      },
      showInformationMessage: message('info'),
      showWarningMessage: message('warning'),
      showErrorMessage: message('error'),
      showOpenDialog: async () => undefined,
      showTextDocument: async () => undefined,
      async withProgress(_opts, task) {
        const cts = new CancellationTokenSource();
        return task({ report() {} }, cts.token);
      },
      createWebviewPanel(viewType, title, _show, options) {
        const panel = {
          viewType,
          title,
          options,
          webview: { html: '' },
          reveal() {},
          onDidDispose: ev(`panelDispose:${state.panels.length}`),
          dispose() {},
        };
        state.panels.push(panel);
        return panel;
      },
      get activeTextEditor() {
        return state.activeTextEditor;
      },
      get activeTerminal() {
        return state.activeTerminal;
      },
      get visibleTextEditors() {
        return state.activeTextEditor ? [state.activeTextEditor] : [];
      },
      tabGroups: { all: [], onDidChangeTabs: ev('tabs'), onDidChangeTabGroups: ev('tabGroups') },
      onDidChangeActiveTextEditor: ev('activeEditor'),
      onDidChangeVisibleTextEditors: ev('visibleEditors'),
      onDidStartTerminalShellExecution: ev('shellStart'),
      onDidEndTerminalShellExecution: ev('shellEnd'),
      onDidCloseTerminal: ev('terminalClose'),
    },
    workspace: {
      get workspaceFolders() {
        return state.workspaceFolders;
      },
      get textDocuments() {
        return state.textDocuments;
      },
      notebookDocuments: [],
      getConfiguration: (section) => ({
        get: (key, dflt) => {
          const full = section ? key : key;
          const v = section === 'firstfault' ? state.config[full] : section === 'firstfault.trace' ? state.config[`trace.${key}`] : undefined;
          return v === undefined ? dflt : v;
        },
        has: () => false,
        inspect: () => undefined,
        update: async () => undefined,
      }),
      getWorkspaceFolder: () => undefined,
      asRelativePath: (u) => (typeof u === 'string' ? u : u.fsPath),
      createFileSystemWatcher: () => ({ onDidCreate: ev('fsw'), onDidChange: ev('fsw'), onDidDelete: ev('fsw'), dispose() {} }),
      applyEdit: async () => true,
      openTextDocument: async (o) => makeDocument(new Uri('untitled', '', 'Untitled-1'), o.language, o.content),
      onDidChangeConfiguration: ev('config'),
      onDidOpenTextDocument: ev('open'),
      onDidCloseTextDocument: ev('close'),
      onDidChangeTextDocument: ev('change'),
      onDidSaveTextDocument: ev('save'),
      onWillSaveTextDocument: ev('willSave'),
      onDidChangeWorkspaceFolders: ev('folders'),
      onDidOpenNotebookDocument: ev('nbOpen'),
      onDidCloseNotebookDocument: ev('nbClose'),
      onDidSaveNotebookDocument: ev('nbSave'),
      onDidChangeNotebookDocument: ev('nbChange'),
      onDidCreateFiles: ev('create'),
      onDidRenameFiles: ev('rename'),
      onDidDeleteFiles: ev('delete'),
      onWillCreateFiles: ev('willCreate'),
      onWillRenameFiles: ev('willRename'),
      onWillDeleteFiles: ev('willDelete'),
    },
    languages: {
      match(selector, doc) {
        const filters = Array.isArray(selector) ? selector : [selector];
        for (const f of filters) {
          if (typeof f === 'string') {
            if (f === doc.languageId) return 10;
            continue;
          }
          if (f.language && f.language !== doc.languageId) continue;
          if (f.scheme && f.scheme !== doc.uri.scheme) continue;
          if (f.pattern && !minimatch(doc.uri.fsPath, typeof f.pattern === 'string' ? f.pattern : f.pattern.pattern, { dot: true })) continue;
          return 10;
        }
        return 0;
      },
      createDiagnosticCollection(name) {
        const map = new Map();
        (state.diagnostics = state.diagnostics || []).push(map);
        return {
          name,
          set(uri, diags) {
            if (Array.isArray(uri)) for (const [u, d] of uri) map.set(u.toString(), d);
            else map.set(uri.toString(), diags);
          },
          delete: (uri) => map.delete(uri.toString()),
          clear: () => map.clear(),
          forEach: (fn) => map.forEach((d, u) => fn(Uri.parse(u), d)),
          get: (uri) => map.get(uri.toString()),
          has: (uri) => map.has(uri.toString()),
          dispose() {},
        };
      },
    },
  };
  // Anything else the client asks for: registration functions return a disposable, value types are
  // generic classes.
  const fallback = (obj, where) =>
    new Proxy(obj, {
      get(target, prop) {
        if (prop in target || typeof prop === 'symbol') return target[prop];
        if (/^(register|create|on)[A-Z]/.test(prop)) return () => new Disposable();
        if (/^[A-Z]/.test(prop)) return (target[prop] = valueClass(prop));
        return undefined;
      },
    });
  for (const k of ['window', 'workspace', 'languages', 'commands', 'env']) vscode[k] = fallback(vscode[k], k);
  return { vscode: fallback(vscode, 'vscode'), state, fire };
}

// Loads a fresh copy of out/extension.js (and the client library) bound to `fake`.
function loadExtension(fake) {
  const root = path.resolve(__dirname, '..');
  for (const k of Object.keys(require.cache)) {
    if (k.startsWith(path.join(root, 'out')) || k.includes(`${path.sep}vscode-languageclient${path.sep}`)) delete require.cache[k];
  }
  const load = Module._load;
  Module._load = function (request, parent, isMain) {
    return request === 'vscode' ? fake.vscode : load.call(this, request, parent, isMain);
  };
  try {
    return require(path.join(root, 'out', 'extension.js'));
  } finally {
    Module._load = load;
  }
}

function context() {
  return { subscriptions: [], extensionPath: path.resolve(__dirname, '..'), globalState: { get() {}, update: async () => {} } };
}

async function waitFor(what, cond, ms = 30000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A stand-in firstfault binary: saves its argv and stdin, prints a page, exits with `status`. */
function fakeBinary(dir, status, stderr = '') {
  const bin = path.join(dir, 'fake-firstfault');
  fs.writeFileSync(
    bin,
    `#!/bin/sh\nprintf '%s\\n' "$@" > '${dir}/argv'\ncat > '${dir}/stdin'\nprintf '<!doctype html><html><head><title>r</title></head><body>report</body></html>'\n` +
      (stderr ? `printf '%s\\n' '${stderr}' >&2\n` : '') +
      `exit ${status}\n`,
    { mode: 0o755 },
  );
  return bin;
}

// ---- Without the real binary ----

test('activate: commands registered, a missing binary named with its setting', async () => {
  const fake = makeFake();
  fake.state.config.path = '/nonexistent/firstfault';
  const ext = loadExtension(fake);
  const ctx = context();
  await ext.activate(ctx);
  for (const c of ['firstfault.diagnoseSelection', 'firstfault.diagnoseTerminal', 'firstfault.diagnoseFolder']) assert.ok(fake.state.commands.has(c), c);
  const err = fake.state.messages.find((m) => m.level === 'error');
  assert.ok(err, JSON.stringify(fake.state.messages));
  assert.equal(err.text, "firstfault: cannot run '/nonexistent/firstfault': not found; set firstfault.path");
  assert.deepEqual(err.items, ['Open settings']);
  await ext.deactivate();
  ctx.subscriptions.forEach((d) => d.dispose());
});

test('diagnoseSelection: the selection goes to `diagnose -` on stdin and the page gets a CSP', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ff-ext-'));
  try {
    const fake = makeFake();
    fake.state.config.path = '/nonexistent/firstfault';
    const ext = loadExtension(fake);
    const ctx = context();
    await ext.activate(ctx);
    fake.state.config.path = fakeBinary(dir, 1);
    fake.state.config.kbDirs = ['/team kb'];
    const text = 'line one\n[rank1]: CUDA out of memory\nline three\n';
    const doc = makeDocument(Uri.file('/logs/job.log'), 'log', text);
    const sel = (a, b) => ({ isEmpty: a === b, start: { compareTo: (o) => a - o.offset, offset: a }, startOffset: a, endOffset: b });
    doc.getText = (range) => (range ? text.slice(range.startOffset, range.endOffset) : text);
    fake.state.activeTextEditor = { document: doc, selections: [sel(9, 36)] };
    await fake.state.commands.get('firstfault.diagnoseSelection')();
    assert.equal(fs.readFileSync(path.join(dir, 'stdin'), 'utf8'), '[rank1]: CUDA out of memory');
    assert.deepEqual(fs.readFileSync(path.join(dir, 'argv'), 'utf8').trimEnd().split('\n'), ['diagnose', '--no-history', '--quiet', '--format', 'html', '--kb', '/team kb', '-']);
    const panel = fake.state.panels.at(-1);
    assert.ok(panel, JSON.stringify(fake.state.messages));
    assert.equal(panel.options.enableScripts, false);
    assert.match(panel.webview.html, /<head><meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;; style-src &#39;unsafe-inline&#39;; img-src data:"><title>/);
    assert.match(panel.title, /^firstfault: failure/);

    // An empty selection: the whole document.
    fake.state.activeTextEditor = { document: doc, selections: [sel(4, 4)] };
    await fake.state.commands.get('firstfault.diagnoseSelection')();
    assert.equal(fs.readFileSync(path.join(dir, 'stdin'), 'utf8'), text);

    // Exit status 2: stderr's first line as an error, no new page.
    fake.state.config.path = fakeBinary(dir, 2, 'firstfault: --kb: directory /team kb does not exist');
    const pages = fake.state.panels.length;
    fake.state.messages.length = 0;
    await fake.state.commands.get('firstfault.diagnoseSelection')();
    assert.deepEqual(fake.state.messages.map((m) => [m.level, m.text]), [['error', 'firstfault: --kb: directory /team kb does not exist']]);
    assert.equal(fake.state.panels.length, pages);
    await ext.deactivate();
    ctx.subscriptions.forEach((d) => d.dispose());
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("diagnoseTerminal: the last finished command's output, escapes stripped", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ff-ext-'));
  try {
    const fake = makeFake();
    fake.state.config.path = '/nonexistent/firstfault';
    const ext = loadExtension(fake);
    const ctx = context();
    await ext.activate(ctx);
    fake.state.config.path = fakeBinary(dir, 1);

    const terminal = { name: 'bash', shellIntegration: undefined };
    fake.state.activeTerminal = terminal;
    fake.state.messages.length = 0;
    await fake.state.commands.get('firstfault.diagnoseTerminal')();
    assert.match(fake.state.messages[0].text, /shell integration is not active/);

    terminal.shellIntegration = {};
    fake.state.messages.length = 0;
    await fake.state.commands.get('firstfault.diagnoseTerminal')();
    assert.match(fake.state.messages[0].text, /no command has finished/);

    const chunks = ['\x1b]633;C\x07\x1b[31m[rank1]: torch.OutOfMemoryError: CUDA out of memory.', '\x1b[0m\r\n', 'done\r\n\x1b]633;D;1\x1b\\'];
    const execution = {
      commandLine: { value: 'torchrun train.py', isTrusted: true, confidence: 2 },
      async *read() {
        for (const c of chunks) {
          await new Promise((r) => setImmediate(r));
          yield c;
        }
      },
    };
    fake.fire('shellStart', { terminal, shellIntegration: terminal.shellIntegration, execution });
    await new Promise((r) => setTimeout(r, 50)); // the read loop drains
    fake.fire('shellEnd', { terminal, shellIntegration: terminal.shellIntegration, execution, exitCode: 1 });
    await fake.state.commands.get('firstfault.diagnoseTerminal')();
    assert.equal(fs.readFileSync(path.join(dir, 'stdin'), 'utf8'), '[rank1]: torch.OutOfMemoryError: CUDA out of memory.\r\ndone\r\n');
    assert.match(fake.state.panels.at(-1).title, /^firstfault: failure \(output of 'torchrun train\.py', exit code 1\)$/);
    await ext.deactivate();
    ctx.subscriptions.forEach((d) => d.dispose());
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// ---- With the real binary: the language client against firstfault lsp ----

test('with firstfault lsp: status bar, explain, copy fix, diagnose folder', { timeout: 120000 }, async (t) => {
  const bin = process.env.FF_BIN;
  if (!bin) {
    t.skip('FF_BIN is not set: set it to a firstfault binary to run this test (test.sh BIN does)');
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ff-ext-'));
  const fake = makeFake();
  const ext = loadExtension(fake);
  const ctx = context();
  try {
    const logs = path.join(dir, 'logs');
    fs.mkdirSync(logs);
    const file = path.join(logs, 'rank1.log');
    const text = '[rank0]: step 120 loss 2.31\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n';
    fs.writeFileSync(file, text);
    const doc = makeDocument(Uri.file(file), 'log', text);
    fake.state.textDocuments.push(doc);
    fake.state.activeTextEditor = { document: doc, selections: [] };
    fake.state.config.path = bin;

    await ext.activate(ctx);
    assert.deepEqual(fake.state.messages.filter((m) => m.level === 'error'), []);
    // The server lists firstfault.diagnoseFolder too: the client registered explain and copyFix, not it.
    assert.ok(fake.state.commands.has('firstfault.explain'));
    assert.ok(fake.state.commands.has('firstfault.copyFix'));

    const item = fake.state.statusItems[0];
    await waitFor('the status bar verdict', () => item.visible && item.text);
    assert.equal(item.text, '$(error) firstfault: cuda_oom on rank 1');
    assert.equal(item.command, 'firstfault.showReport');
    const diags = await waitFor('diagnostics', () => (fake.state.diagnostics || []).map((m) => m.get(doc.uri.toString())).find((d) => d && d.length > 0));
    assert.ok(diags.length >= 1);

    // Another editor without a verdict hides the item; back to the log shows it again.
    fake.state.activeTextEditor = { document: makeDocument(Uri.file('/x/notes.txt'), 'plaintext', 'hi'), selections: [] };
    fake.fire('activeEditor', fake.state.activeTextEditor);
    assert.equal(item.visible, false);
    fake.state.activeTextEditor = { document: doc, selections: [] };
    fake.fire('activeEditor', fake.state.activeTextEditor);
    assert.equal(item.visible, true);

    await fake.vscode.commands.executeCommand('firstfault.explain', 'cuda_oom');
    const explain = fake.state.panels.find((p) => p.viewType === 'firstfault.explain');
    assert.ok(explain, JSON.stringify(fake.state.messages));
    assert.match(explain.webview.html, /Content-Security-Policy/);
    assert.match(explain.webview.html, /CUDA out of memory/);

    await fake.vscode.commands.executeCommand('firstfault.copyFix', doc.uri.toString());
    assert.match(fake.state.clipboard, /\S/);
    assert.ok(fake.state.messages.some((m) => m.text === 'firstfault: fix copied'));

    fake.state.messages.length = 0;
    await fake.state.commands.get('firstfault.diagnoseFolder')(Uri.file(logs));
    const summary = fake.state.messages.find((m) => m.level === 'info');
    assert.ok(summary, JSON.stringify(fake.state.messages));
    assert.match(summary.text, /^firstfault: failure: cuda_oom on rank 1: .*; 1 input$/);
    assert.deepEqual(summary.items, ['Show problems', 'Show JSON']);

    // The status item's click: the whole document's HTML report from `firstfault diagnose -`.
    await fake.state.commands.get('firstfault.showReport')();
    const report = fake.state.panels.find((p) => p.viewType === 'firstfault.report');
    assert.ok(report, JSON.stringify(fake.state.messages));
    assert.match(report.webview.html, /<html/);
    assert.match(report.webview.html, /Content-Security-Policy/);
  } finally {
    await ext.deactivate();
    ctx.subscriptions.forEach((d) => d.dispose());
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
