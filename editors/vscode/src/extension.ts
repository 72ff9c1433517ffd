// The VS Code side of firstfault: starts `firstfault lsp` as a language server for log files, shows its
// verdict in the status bar, and adds three commands that run the local binary (a selection, a
// terminal's last command, a folder of rank logs). Everything runs on this machine: nothing is uploaded.
import * as os from 'os';
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
} from 'vscode-languageclient/node';

import { FirstfaultConfig, diagnoseArgs, lspArgs, normalizeConfig, serverCommandsToRegister } from './args';
import {
  VerdictInfo,
  ensureCsp,
  htmlPage,
  interpretExit,
  parseVerdict,
  preformattedPage,
  statusText,
  statusTooltip,
  summaryLine,
} from './report';
import { RunResult, findExecutable, runBinary, spawnErrorMessage } from './run';
import { CommandRecorder, RecordedCommand, stripEscapes } from './terminal';

const SHOW_REPORT = 'firstfault.showReport'; // the status-bar item's click (not in the palette)

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;
let statusItem: vscode.StatusBarItem;
const verdicts = new Map<string, VerdictInfo>(); // document URI (VS Code's spelling) -> last verdict
const recorder = new CommandRecorder<vscode.Terminal, vscode.TerminalShellExecution>();
const panels = new Map<string, vscode.WebviewPanel>(); // one reused panel per purpose

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel('firstfault');
  statusItem = vscode.window.createStatusBarItem('firstfault.verdict', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'firstfault verdict';
  context.subscriptions.push(output, statusItem);

  context.subscriptions.push(
    vscode.commands.registerCommand('firstfault.diagnoseSelection', () => diagnoseSelection(false)),
    vscode.commands.registerCommand(SHOW_REPORT, () => diagnoseSelection(true)),
    vscode.commands.registerCommand('firstfault.diagnoseTerminal', diagnoseTerminal),
    vscode.commands.registerCommand('firstfault.diagnoseFolder', (uri?: unknown) => diagnoseFolder(uri)),
    vscode.window.onDidChangeActiveTextEditor(updateStatus),
    vscode.workspace.onDidCloseTextDocument((doc) => {
      verdicts.delete(doc.uri.toString());
      updateStatus();
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('firstfault.path') || e.affectsConfiguration('firstfault.kbDirs')) void restartClient();
    }),
    { dispose: () => void stopClient() },
  );
  watchTerminals(context);
  await startClient();
}

export async function deactivate(): Promise<void> {
  await stopClient();
}

// ---- Settings ----

function config(): FirstfaultConfig {
  const c = vscode.workspace.getConfiguration('firstfault');
  return normalizeConfig({ path: c.get('path'), kbDirs: c.get('kbDirs') }, os.homedir());
}

/** The folder relative paths in the settings are taken from: the document's workspace folder, or the first. */
function workingDirectory(uri?: vscode.Uri): string | undefined {
  const folder = (uri && vscode.workspace.getWorkspaceFolder(uri)) ?? vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined;
}

// ---- The language client ----

async function startClient(): Promise<void> {
  const cfg = config();
  const cwd = workingDirectory();
  if (findExecutable(cfg.path, process.env.PATH, cwd) === undefined) {
    const message = spawnErrorMessage(cfg.path, { code: 'ENOENT' });
    output.appendLine(message);
    void showErrorWithSettings(message);
    return;
  }
  const serverOptions: ServerOptions = {
    command: cfg.path,
    args: lspArgs(cfg), // no transport given: stdio, and no --stdio appended
    options: { cwd },
  };
  const clientOptions: LanguageClientOptions = {
    // Logs on disk and unsaved ones. Not the `output` scheme: VS Code's Output panel has language `log`
    // too, and this client's own trace would be sent back to the server.
    documentSelector: [
      { scheme: 'file', language: 'log' },
      { scheme: 'untitled', language: 'log' },
      { scheme: 'file', language: 'firstfault-log' },
      { scheme: 'untitled', language: 'firstfault-log' },
      { scheme: 'file', pattern: '**/*.{log,out,err}' },
    ],
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    middleware: {
      executeCommand: async (command, args, next) => {
        const result = await next(command, args);
        if (command === 'firstfault.explain') await showExplanation(result);
        else if (command === 'firstfault.copyFix') await copyFix(result);
        return result;
      },
    },
  };
  const c = new LanguageClient('firstfault', 'firstfault', serverOptions, clientOptions);
  keepOwnCommands(c);
  c.onNotification('firstfault/verdict', (params: unknown) => {
    const v = parseVerdict(params);
    if (!v) return;
    verdicts.set(vscode.Uri.parse(v.uri).toString(), v);
    updateStatus();
  });
  client = c;
  try {
    await c.start();
  } catch (e) {
    if (client === c) client = undefined;
    const message = isSpawnFailure(e) ? spawnErrorMessage(cfg.path, e) : `firstfault: the language server did not start: ${errorText(e)}`;
    output.appendLine(message);
    void showErrorWithSettings(message);
  }
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  verdicts.clear();
  updateStatus();
  if (c) {
    try {
      await c.dispose(2000); // shutdown + exit, then the process is ended if it is still there
    } catch {
      // a server that is gone already
    }
  }
}

async function restartClient(): Promise<void> {
  await stopClient();
  await startClient();
}

/**
 * The client registers a VS Code command for each command the server lists in executeCommandProvider.
 * The server lists firstfault.diagnoseFolder, which this extension registers itself (it asks for the
 * folder first): a second registration would fail, so such names are left out.
 */
function keepOwnCommands(c: LanguageClient): void {
  type Registration = { id: string; registerOptions: { commands?: string[] } };
  const feature = (c as unknown as { getFeature(method: string): { register(data: Registration): void } | undefined }).getFeature(
    ExecuteCommandRequest.method,
  );
  if (!feature) return;
  const register = feature.register.bind(feature);
  feature.register = (data: Registration) => {
    const commands = serverCommandsToRegister(data.registerOptions.commands);
    register({ ...data, registerOptions: { ...data.registerOptions, commands } });
  };
}

function isSpawnFailure(e: unknown): boolean {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR';
}

async function runningClient(): Promise<LanguageClient | undefined> {
  if (!client) {
    await startClient();
    if (!client) return undefined; // startClient said why
  }
  const c = client;
  if (!c.isRunning()) {
    try {
      await c.start();
    } catch {
      // reported below
    }
  }
  if (c.isRunning()) return c;
  void showErrorWithSettings('firstfault: the language server is not running (see the firstfault output channel)');
  return undefined;
}

// ---- Status bar ----

function updateStatus(): void {
  const editor = vscode.window.activeTextEditor;
  const v = editor ? verdicts.get(editor.document.uri.toString()) : undefined;
  if (!v) {
    statusItem.hide();
    return;
  }
  statusItem.text = statusText(v);
  statusItem.tooltip = statusTooltip(v);
  statusItem.command = SHOW_REPORT;
  statusItem.backgroundColor =
    v.verdict === 'failure'
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : v.verdict === 'undetermined'
        ? new vscode.ThemeColor('statusBarItem.warningBackground')
        : undefined;
  statusItem.show();
}

// ---- Results of the server's commands ----

async function showExplanation(result: unknown): Promise<void> {
  const r = (typeof result === 'object' && result !== null ? result : {}) as { title?: unknown; markdown?: unknown };
  const title = typeof r.title === 'string' && r.title !== '' ? r.title : 'firstfault: explanation';
  const markdown = typeof r.markdown === 'string' ? r.markdown : '';
  if (markdown === '') {
    void vscode.window.showInformationMessage('firstfault: no explanation for this line');
    return;
  }
  let html: string;
  try {
    const body = await vscode.commands.executeCommand<string>('markdown.api.render', markdown);
    if (typeof body !== 'string') throw new Error('markdown.api.render returned no text');
    html = htmlPage(title, body);
  } catch {
    html = preformattedPage(title, markdown);
  }
  showPage('explain', title, html);
}

async function copyFix(result: unknown): Promise<void> {
  const text = typeof result === 'object' && result !== null ? (result as { text?: unknown }).text : undefined;
  if (typeof text !== 'string' || text.trim() === '') {
    void vscode.window.showInformationMessage('firstfault: no fix to copy for this document');
    return;
  }
  await vscode.env.clipboard.writeText(text);
  void vscode.window.showInformationMessage('firstfault: fix copied');
}

function showPage(purpose: string, title: string, html: string): void {
  let panel = panels.get(purpose);
  if (panel) {
    panel.title = title;
    panel.reveal(undefined, true);
  } else {
    panel = vscode.window.createWebviewPanel(
      `firstfault.${purpose}`,
      title,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      { enableScripts: false, enableFindWidget: true, localResourceRoots: [] },
    );
    const p = panel;
    panel.onDidDispose(() => {
      if (panels.get(purpose) === p) panels.delete(purpose);
    });
    panels.set(purpose, panel);
  }
  panel.webview.html = ensureCsp(html);
}

// ---- Diagnose a selection, a document or a terminal's output with `firstfault diagnose -` ----

async function diagnoseSelection(wholeDocument: boolean): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showInformationMessage('firstfault: open a log and select the lines to diagnose');
    return;
  }
  const doc = editor.document;
  const selected = wholeDocument
    ? []
    : editor.selections
        .filter((s) => !s.isEmpty)
        .sort((a, b) => a.start.compareTo(b.start))
        .map((s) => doc.getText(s));
  const text = selected.length > 0 ? selected.join('\n') : doc.getText();
  const name = vscode.workspace.asRelativePath(doc.uri, false);
  await diagnoseText(text, selected.length > 0 ? `selection of ${name}` : name, workingDirectory(doc.uri));
}

async function diagnoseText(text: string, what: string, cwd: string | undefined): Promise<void> {
  if (text.trim() === '') {
    void vscode.window.showInformationMessage(`firstfault: nothing to diagnose (${what} is empty)`);
    return;
  }
  const cfg = config();
  let result: RunResult;
  try {
    result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `firstfault: diagnosing ${what}`, cancellable: true },
      (_progress, token) => {
        const abort = new AbortController();
        token.onCancellationRequested(() => abort.abort());
        return runBinary(cfg.path, diagnoseArgs(cfg), { stdin: text, cwd, signal: abort.signal });
      },
    );
  } catch (e) {
    const message = errorText(e);
    if (message !== 'firstfault: cancelled') void showErrorWithSettings(message);
    return;
  }
  const meaning = interpretExit(result.status, result.stderr, result.signal);
  if (meaning.kind === 'error') {
    output.appendLine(`${cfg.path} ${diagnoseArgs(cfg).join(' ')}: status ${result.status ?? result.signal}`);
    if (result.stderr) output.appendLine(result.stderr.trimEnd());
    void vscode.window.showErrorMessage(meaning.message);
    return;
  }
  if (result.stdoutTruncated) {
    void vscode.window.showErrorMessage('firstfault: the report was too large to show');
    return;
  }
  const html = result.stdout.trim() !== '' ? result.stdout : preformattedPage(`firstfault: ${meaning.verdict}`, '(the report was empty)');
  showPage('report', `firstfault: ${meaning.verdict} (${what})`, html);
}

// ---- Terminals (shell integration) ----

function watchTerminals(context: vscode.ExtensionContext): void {
  // Each command's output is read from its start (read() must be called right away not to miss any).
  context.subscriptions.push(
    vscode.window.onDidStartTerminalShellExecution((e) => {
      const command = recorder.start(e.terminal, e.execution, e.execution.commandLine.value);
      void readInto(e.execution, command);
    }),
    vscode.window.onDidEndTerminalShellExecution((e) => {
      recorder.end(e.execution, e.execution.commandLine.value, e.exitCode);
    }),
    vscode.window.onDidCloseTerminal((t) => recorder.forget(t)),
  );
}

async function readInto(execution: vscode.TerminalShellExecution, command: RecordedCommand): Promise<void> {
  try {
    for await (const data of execution.read()) command.output.append(data);
  } catch (e) {
    output.appendLine(`firstfault: reading terminal output failed: ${errorText(e)}`);
  }
}

async function diagnoseTerminal(): Promise<void> {
  const terminal = vscode.window.activeTerminal;
  if (!terminal) {
    void vscode.window.showInformationMessage('firstfault: no active terminal');
    return;
  }
  let command = recorder.finished(terminal);
  if (!command) {
    const running = recorder.running(terminal);
    if (running) {
      const pick = await vscode.window.showInformationMessage(
        `firstfault: '${shortCommand(running.commandLine)}' is still running in this terminal`,
        'Diagnose its output so far',
      );
      if (!pick) return;
      command = running;
    } else if (!terminal.shellIntegration) {
      void vscode.window.showWarningMessage(
        "firstfault: shell integration is not active in this terminal, so its output cannot be read. Enable 'terminal.integrated.shellIntegration.enabled' and open a new terminal (bash, zsh, fish or pwsh).",
      );
      return;
    } else {
      void vscode.window.showInformationMessage('firstfault: no command has finished in this terminal since the extension started; run the command again');
      return;
    }
  }
  const text = stripEscapes(command.output.text());
  const exit = command.exitCode === undefined ? '' : `, exit code ${command.exitCode}`;
  if (command.output.truncated) output.appendLine(`firstfault: only the last ${command.output.byteLength} bytes of the terminal output were kept`);
  await diagnoseText(text, `output of '${shortCommand(command.commandLine)}'${exit}`, workingDirectory());
}

function shortCommand(line: string): string {
  const one = line.replace(/\s+/g, ' ').trim() || 'the last command';
  return one.length > 60 ? one.slice(0, 59) + '…' : one;
}

// ---- Diagnose a folder through the language server ----

async function diagnoseFolder(arg?: unknown): Promise<void> {
  let folder = arg instanceof vscode.Uri ? arg : undefined;
  if (!folder) {
    const picked = await vscode.window.showOpenDialog({
      canSelectFolders: true,
      canSelectFiles: false,
      canSelectMany: false,
      defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
      openLabel: 'Diagnose',
      title: 'firstfault: folder of rank logs',
    });
    folder = picked?.[0];
  }
  if (!folder) return;
  if (folder.scheme !== 'file') {
    void vscode.window.showErrorMessage('firstfault: only folders on this machine can be diagnosed');
    return;
  }
  const c = await runningClient();
  if (!c) return;
  const fsPath = folder.fsPath;
  let report: unknown;
  try {
    report = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `firstfault: diagnosing ${fsPath}`, cancellable: true },
      (_progress, token) => c.sendRequest(ExecuteCommandRequest.type, { command: 'firstfault.diagnoseFolder', arguments: [fsPath] }, token),
    );
  } catch (e) {
    if (isCancelled(e)) return;
    void vscode.window.showErrorMessage(`firstfault: diagnosing ${fsPath} failed: ${errorText(e)}`);
    return;
  }
  const line = summaryLine(report);
  const pick = await vscode.window.showInformationMessage(line, 'Show problems', 'Show JSON');
  if (pick === 'Show problems') await vscode.commands.executeCommand('workbench.actions.view.problems');
  else if (pick === 'Show JSON') {
    const doc = await vscode.workspace.openTextDocument({ language: 'json', content: JSON.stringify(report, null, 2) });
    await vscode.window.showTextDocument(doc, { preview: true });
  }
}

function isCancelled(e: unknown): boolean {
  // vscode-jsonrpc rejects a cancelled request with code -32800 (RequestCancelled).
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === -32800;
}

// ---- Messages ----

async function showErrorWithSettings(message: string): Promise<void> {
  const pick = await vscode.window.showErrorMessage(message, 'Open settings');
  if (pick === 'Open settings') await vscode.commands.executeCommand('workbench.action.openSettings', 'firstfault.');
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
