// What the extension shows: webview pages, the status-bar text, the one-line folder summary, and what
// an exit status of `firstfault diagnose` means. No `vscode` import here: the unit tests run this file
// under plain node.

/** The policy given to a page that brings none of its own: no scripts, no fetches, inline styles only. */
export const DEFAULT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

const CSP_META_RE = /<meta\b[^>]*\bhttp-equiv\s*=\s*(["']?)content-security-policy\1[^>]*>/i;

/** True when the page carries a Content-Security-Policy meta tag. */
export function hasCspMeta(html: string): boolean {
  return CSP_META_RE.test(html);
}

/**
 * The page with a Content-Security-Policy meta tag: unchanged when it has one, otherwise with
 * DEFAULT_CSP inserted at the start of <head> (a <head> is made after <html> when there is none, and
 * the tag goes first when there is neither).
 */
export function ensureCsp(html: string, csp: string = DEFAULT_CSP): string {
  if (hasCspMeta(html)) return html;
  const meta = `<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">`;
  const head = /<head\b[^>]*>/i.exec(html);
  if (head) {
    const at = head.index + head[0].length;
    return html.slice(0, at) + meta + html.slice(at);
  }
  const root = /<html\b[^>]*>/i.exec(html);
  if (root) {
    const at = root.index + root[0].length;
    return html.slice(0, at) + '<head>' + meta + '</head>' + html.slice(at);
  }
  const doctype = /^\s*<!doctype[^>]*>/i.exec(html);
  if (doctype) {
    const at = doctype[0].length;
    return html.slice(0, at) + meta + html.slice(at);
  }
  return meta + html;
}

/** Text made safe to put in HTML (element content or a quoted attribute). */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const PAGE_STYLE = [
  'body{font-family:var(--vscode-font-family,sans-serif);color:var(--vscode-foreground);padding:0 1.5em 1.5em}',
  'pre,code{font-family:var(--vscode-editor-font-family,monospace)}',
  'pre{white-space:pre-wrap;word-break:break-word}',
].join('');

/** A complete page around HTML the caller trusts (e.g. Markdown rendered by VS Code), with DEFAULT_CSP. */
export function htmlPage(title: string, bodyHtml: string): string {
  return (
    '<!DOCTYPE html><html><head><meta charset="utf-8">' +
    `<meta http-equiv="Content-Security-Policy" content="${escapeHtml(DEFAULT_CSP)}">` +
    `<title>${escapeHtml(title)}</title><style>${PAGE_STYLE}</style></head>` +
    `<body>${bodyHtml}</body></html>`
  );
}

/** A page showing `text` as escaped preformatted text under a heading. */
export function preformattedPage(title: string, text: string): string {
  return htmlPage(title, `<h1>${escapeHtml(title)}</h1><pre>${escapeHtml(text)}</pre>`);
}

// ---- The firstfault/verdict notification and the status bar ----

export type Verdict = 'failure' | 'undetermined' | 'healthy';

/** The params of the server's `firstfault/verdict` notification. */
export interface VerdictInfo {
  uri: string;
  verdict: Verdict;
  kind: string;
  title: string;
  initiatingRank: number | null;
  initiatingHost: string | null;
}

const VERDICTS: readonly string[] = ['failure', 'undetermined', 'healthy'];

/** The notification's params checked field by field; undefined when the uri or the verdict is unusable. */
export function parseVerdict(params: unknown): VerdictInfo | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const p = params as Record<string, unknown>;
  if (typeof p.uri !== 'string' || p.uri === '') return undefined;
  if (typeof p.verdict !== 'string' || !VERDICTS.includes(p.verdict)) return undefined;
  const rank = p.initiatingRank;
  return {
    uri: p.uri,
    verdict: p.verdict as Verdict,
    kind: typeof p.kind === 'string' ? p.kind : '',
    title: typeof p.title === 'string' ? p.title : '',
    initiatingRank: typeof rank === 'number' && Number.isInteger(rank) && rank >= 0 ? rank : null,
    initiatingHost: typeof p.initiatingHost === 'string' && p.initiatingHost !== '' ? p.initiatingHost : null,
  };
}

/**
 * Text from the server made safe for a status-bar label: one line, no "$(" (which would start a
 * codicon), at most `max` characters.
 */
export function labelSafe(text: string, max = 60): string {
  let s = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/\$\(/g, '$ (').trim();
  if (s.length > max) s = s.slice(0, max - 1) + '…';
  return s;
}

/** "$(error) firstfault: cuda_oom on rank 3", "$(warning) firstfault: undetermined", "$(check) firstfault: healthy". */
export function statusText(v: VerdictInfo): string {
  switch (v.verdict) {
    case 'healthy':
      return '$(check) firstfault: healthy';
    case 'undetermined':
      return '$(warning) firstfault: undetermined';
    case 'failure': {
      const what = labelSafe(v.kind) || labelSafe(v.title) || 'failure';
      let where = '';
      if (v.initiatingRank !== null) where = ` on rank ${v.initiatingRank}`;
      else if (v.initiatingHost !== null) where = ` on ${labelSafe(v.initiatingHost, 40)}`;
      return `$(error) firstfault: ${what}${where}`;
    }
  }
}

/** The status-bar item's tooltip: what was found and where, plain text. */
export function statusTooltip(v: VerdictInfo): string {
  const lines: string[] = [];
  switch (v.verdict) {
    case 'healthy':
      lines.push('firstfault: no failure found in this log');
      break;
    case 'undetermined':
      lines.push('firstfault: something went wrong, but no known signature matched (see the warnings)');
      break;
    case 'failure':
      lines.push(`firstfault: ${v.title || v.kind || 'failure'}`);
      if (v.kind && v.title) lines.push(`kind: ${v.kind}`);
      if (v.initiatingRank !== null) lines.push(`first failing rank: ${v.initiatingRank}`);
      if (v.initiatingHost !== null) lines.push(`host: ${v.initiatingHost}`);
      break;
  }
  lines.push('Click for the full report');
  return lines.join('\n');
}

// ---- The folder report (firstfault.report/v1) ----

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/**
 * One line about a JSON report, e.g.
 * "firstfault: failure: cuda_oom on rank 3 (host node-2): CUDA out of memory; 16 inputs".
 * Defensive: fields that are missing or of another type are left out, and a report with none of the
 * known fields is described by its keys.
 */
export function summaryLine(report: unknown): string {
  if (report === null || report === undefined) return 'firstfault: the server returned no report';
  if (!isObject(report)) return `firstfault: the server returned ${Array.isArray(report) ? 'an array' : typeof report}, not a report`;
  const r = report;
  const parts: string[] = [];
  const verdict = typeof r.verdict === 'string' ? r.verdict : undefined;
  if (verdict) parts.push(verdict);
  const rc = isObject(r.root_cause) ? r.root_cause : undefined;
  let kind = '';
  let title = '';
  if (rc) {
    kind = typeof rc.kind === 'string' ? rc.kind : typeof rc.signature === 'string' ? rc.signature : '';
    title = typeof rc.title === 'string' ? rc.title : '';
  }
  const rank = typeof r.initiating_rank === 'number' ? r.initiating_rank : undefined;
  const host = typeof r.initiating_host === 'string' && r.initiating_host !== '' ? r.initiating_host : undefined;
  let where = '';
  if (rank !== undefined) where = ` on rank ${rank}${host ? ` (host ${host})` : ''}`;
  else if (host) where = ` on ${host}`;
  if (kind || where) parts.push((kind || 'root cause') + where);
  if (title && title !== kind) parts.push(title);
  const counts: string[] = [];
  if (Array.isArray(r.inputs)) counts.push(plural(r.inputs.length, 'input'));
  if (Array.isArray(r.input_errors) && r.input_errors.length > 0) counts.push(plural(r.input_errors.length, 'unreadable input'));
  if (Array.isArray(r.collateral) && r.collateral.length > 0) counts.push(plural(r.collateral.length, 'collateral group'));
  if (parts.length === 0 && counts.length === 0) {
    const keys = Object.keys(r);
    return keys.length === 0 ? 'firstfault: the report is empty' : `firstfault: report with ${keys.slice(0, 8).join(', ')}${keys.length > 8 ? ', …' : ''}`;
  }
  return 'firstfault: ' + parts.join(': ') + (counts.length > 0 ? (parts.length > 0 ? '; ' : '') + counts.join(', ') : '');
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

// ---- Exit status of `firstfault diagnose` ----

export type ExitMeaning = { kind: 'verdict'; verdict: Verdict } | { kind: 'error'; message: string };

/** The first line of stderr that is not blank, trimmed ('' when there is none). */
export function firstLine(text: string): string {
  for (const line of text.split(/\r\n|\r|\n/)) {
    const t = line.trim();
    if (t !== '') return t;
  }
  return '';
}

/**
 * 0 healthy, 1 failure, 3 undetermined: verdicts (stdout holds the report). Anything else is an error
 * (2 usage or input, 4 engine, 5 knowledge base, or a signal): the message is stderr's first line, or
 * says what happened when stderr is empty. `signal` is the signal that ended the process, if any.
 */
export function interpretExit(status: number | null, stderr: string, signal?: string | null): ExitMeaning {
  if (status === 0) return { kind: 'verdict', verdict: 'healthy' };
  if (status === 1) return { kind: 'verdict', verdict: 'failure' };
  if (status === 3) return { kind: 'verdict', verdict: 'undetermined' };
  const line = firstLine(stderr);
  if (line !== '') return { kind: 'error', message: line.startsWith('firstfault') ? line : `firstfault: ${line}` };
  if (status === null) return { kind: 'error', message: `firstfault: the process was ended by ${signal ?? 'a signal'}` };
  const what: Record<number, string> = { 2: 'bad usage or input', 4: 'engine failure', 5: 'knowledge base error' };
  return { kind: 'error', message: `firstfault: exit status ${status}${what[status] ? ` (${what[status]})` : ''}` };
}
