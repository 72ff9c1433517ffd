// Command lines for the firstfault binary, built from the extension's settings.
// No `vscode` import here: the unit tests run this file under plain node.

/** The settings the command lines depend on (firstfault.path, firstfault.kbDirs). */
export interface FirstfaultConfig {
  /** The binary: a name looked up on PATH, or a path. */
  path: string;
  /** Extra knowledge-base directories, each given as `--kb DIR`. */
  kbDirs: readonly string[];
}

export const DEFAULT_BINARY = 'firstfault';

/**
 * A config from whatever the settings held: a missing or blank path becomes "firstfault", kbDirs keeps
 * only non-blank strings, and a leading "~/" (or a lone "~") is replaced by `home` when one is given.
 */
export function normalizeConfig(raw: { path?: unknown; kbDirs?: unknown }, home?: string): FirstfaultConfig {
  const expand = (p: string): string => {
    if (home === undefined || home === '') return p;
    if (p === '~') return home;
    if (p.startsWith('~/')) return home.replace(/\/+$/, '') + p.slice(1);
    return p;
  };
  const path = typeof raw.path === 'string' && raw.path.trim() !== '' ? expand(raw.path.trim()) : DEFAULT_BINARY;
  const dirs = Array.isArray(raw.kbDirs) ? raw.kbDirs : [];
  const kbDirs = dirs
    .filter((d): d is string => typeof d === 'string' && d.trim() !== '')
    .map((d) => expand(d.trim()));
  return { path, kbDirs };
}

/** `--kb D1 --kb D2 ...`, in the order of the setting (later directories override earlier ones by name). */
export function kbArgs(cfg: FirstfaultConfig): string[] {
  const out: string[] = [];
  for (const d of cfg.kbDirs) out.push('--kb', d);
  return out;
}

/** The language server: `firstfault lsp --kb D...` (JSON-RPC over stdio). */
export function lspArgs(cfg: FirstfaultConfig): string[] {
  return ['lsp', ...kbArgs(cfg)];
}

/**
 * One diagnosis of text given on stdin, as a self-contained HTML page on stdout:
 * `firstfault diagnose --no-history --quiet --format html --kb D... -`.
 * --no-history: text from an editor or a terminal is not a job the user asked to keep.
 */
export function diagnoseArgs(cfg: FirstfaultConfig): string[] {
  return ['diagnose', '--no-history', '--quiet', '--format', 'html', ...kbArgs(cfg), '-'];
}

/** The commands this extension registers itself (its contributed commands). */
export const EXTENSION_COMMANDS: readonly string[] = [
  'firstfault.diagnoseSelection',
  'firstfault.diagnoseTerminal',
  'firstfault.diagnoseFolder',
];

/**
 * Of the commands the server lists in executeCommandProvider, those the language client should register
 * as VS Code commands: all but the extension's own (the server lists firstfault.diagnoseFolder, which the
 * extension registers itself to ask for the folder first; a second registration of a name fails).
 */
export function serverCommandsToRegister(serverCommands: readonly unknown[] | undefined): string[] {
  return (serverCommands ?? []).filter((c): c is string => typeof c === 'string' && !EXTENSION_COMMANDS.includes(c));
}
