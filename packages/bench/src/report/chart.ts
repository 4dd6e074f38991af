/**
 * chart.svg: one panel per timed workload, a horizontal bar per target on a
 * log scale of operations per second (reads as calls per second), with the
 * raw round-trip rate of each backend under the append panels, and the date,
 * machine and command in the footer.
 */
import { machineLine } from '../machine.js';
import type { Results, WorkloadId } from '../results.js';
import { formatRate, formatRatio, speedup } from './format.js';

const WIDTH = 980;
const LABEL_WIDTH = 330;
const BAR_LEFT = LABEL_WIDTH + 10;
const BAR_WIDTH = 470;
const ROW = 20;
const BAR = 13;
const COLORS = { store: '#1a73e8', peer: '#e8710a', raw: '#9aa0a6' } as const;

interface Bar {
  label: string;
  value: number;
  kind: keyof typeof COLORS;
  note: string;
}

interface Panel {
  title: string;
  bars: Bar[];
}

const PANELS: Array<{ id: WorkloadId; title: (results: Results) => string; probes?: 'sequential' | 'concurrent' }> = [
  {
    id: 'append-sequential',
    title: () => 'appendEvent, one session — events/s',
    probes: 'sequential',
  },
  {
    id: 'append-concurrent',
    title: (results) => `appendEvent, ${results.options.sizes.concurrentSessions} sessions at once — events/s`,
    probes: 'concurrent',
  },
  {
    id: 'recent-large',
    title: (results) =>
      `getSession, ${results.options.sizes.recentEvents} recent of ${results.options.sizes.largeHistory?.toLocaleString('en-US')} events — calls/s`,
  },
  {
    id: 'whole',
    title: (results) =>
      `getSession, whole history of ${results.options.sizes.wholeHistory?.toLocaleString('en-US')} events — calls/s`,
  },
  {
    id: 'list',
    title: (results) =>
      `listSessions, page of ${results.options.sizes.listPage} among ${results.options.sizes.listSessions?.toLocaleString('en-US')} sessions — calls/s`,
  },
];

function axisLabel(value: number): string {
  return value >= 1 ? Math.round(value).toLocaleString('en-US') : String(Number(value.toPrecision(1)));
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function panels(results: Results): Panel[] {
  const out: Panel[] = [];
  for (const spec of PANELS) {
    const workload = results.workloads.find((each) => each.id === spec.id);
    if (!workload) continue;
    const bars: Bar[] = [];
    for (const target of results.targets) {
      const median = workload.cells[target.id]?.value?.median;
      if (target.status !== 'ok' || median === undefined || median <= 0) continue;
      const value = workload.unit === 'ms' ? 1000 / median : median;
      const versus = target.id === 'adk-db-postgresql' ? undefined : speedup(workload, target.id, 'adk-db-postgresql');
      bars.push({
        label: target.label,
        value,
        kind: target.kind,
        note: versus === undefined ? '' : `${formatRatio(versus)} DB/PG`,
      });
    }
    if (spec.probes) {
      for (const backend of results.backends) {
        for (const probe of backend.probes) {
          const summary = probe[spec.probes];
          const suffix = spec.probes === 'concurrent' ? ` ×${results.options.rawConcurrency}` : '';
          bars.push({
            label: `raw ${backend.label} ${probe.name}${suffix}`,
            value: summary.median,
            kind: 'raw',
            note: '',
          });
        }
      }
    }
    if (bars.length > 0) out.push({ title: spec.title(results), bars });
  }
  return out;
}

export function renderChart(results: Results): string {
  const list = panels(results);
  const parts: string[] = [];
  let y = 0;
  const text = (x: number, at: number, content: string, attributes = '') =>
    parts.push(`<text x="${x}" y="${at}"${attributes ? ` ${attributes}` : ''}>${escapeXml(content)}</text>`);

  y += 30;
  text(20, y, "adk-state bench: every store against @google/adk's own session services", 'class="title"');
  y += 20;
  text(
    20,
    y,
    `Medians of ${results.options.repetitions} interleaved repetitions after a warm-up. Log scale, higher is better; "DB/PG" = times DatabaseSessionService on PostgreSQL.`,
    'class="small"',
  );
  y += 22;
  let legendX = 20;
  for (const [kind, name] of [
    ['store', 'adk-state store'],
    ['peer', '@google/adk session service'],
    ['raw', 'raw round trip of the backend (physical limit)'],
  ] as const) {
    parts.push(`<rect x="${legendX}" y="${y - 10}" width="12" height="12" fill="${COLORS[kind]}"/>`);
    text(legendX + 18, y, name, 'class="small"');
    legendX += 30 + name.length * 6.3;
  }
  y += 14;

  for (const panel of list) {
    const values = panel.bars.map((bar) => bar.value);
    const low = 10 ** Math.floor(Math.log10(Math.min(...values)));
    const high = 10 ** Math.ceil(Math.log10(Math.max(...values)));
    const span = Math.max(1, Math.log10(high) - Math.log10(low));
    const scale = (value: number) => ((Math.log10(value) - Math.log10(low)) / span) * BAR_WIDTH;
    y += 28;
    text(20, y, panel.title, 'class="panel"');
    y += 8;
    const top = y;
    const bottom = top + panel.bars.length * ROW + 4;
    for (let power = Math.log10(low); power <= Math.log10(high) + 1e-9; power++) {
      const x = BAR_LEFT + scale(10 ** power);
      parts.push(`<line x1="${x.toFixed(1)}" y1="${top}" x2="${x.toFixed(1)}" y2="${bottom}" class="grid"/>`);
      text(x, bottom + 12, axisLabel(10 ** power), 'class="axis" text-anchor="middle"');
    }
    for (const [index, bar] of panel.bars.entries()) {
      const rowTop = top + index * ROW + 4;
      const width = Math.max(1, scale(bar.value));
      text(LABEL_WIDTH, rowTop + BAR - 2, bar.label, 'class="label" text-anchor="end"');
      parts.push(
        `<rect x="${BAR_LEFT}" y="${rowTop}" width="${width.toFixed(1)}" height="${BAR}" fill="${COLORS[bar.kind]}"><title>${escapeXml(`${bar.label}: ${formatRate(bar.value)}/s`)}</title></rect>`,
      );
      const note = bar.note ? `  (${bar.note})` : '';
      text(BAR_LEFT + width + 6, rowTop + BAR - 2, `${formatRate(bar.value)}${note}`, 'class="value"');
    }
    y = bottom + 14;
  }

  y += 28;
  text(20, y, `${results.date.slice(0, 10)} · ${machineLine(results.machine)}`, 'class="small"');
  y += 16;
  text(20, y, `command: ${results.command} (run took ${Math.round(results.durationSeconds)} s)`, 'class="small"');
  y += 16;

  const style = [
    'text{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;fill:#202124}',
    '.title{font-size:17px;font-weight:600}',
    '.panel{font-size:14px;font-weight:600}',
    '.label{font-size:12px}',
    '.value{font-size:11px;fill:#3c4043}',
    '.axis{font-size:10px;fill:#5f6368}',
    '.small{font-size:11px;fill:#5f6368}',
    '.grid{stroke:#dadce0;stroke-width:1}',
  ].join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y}" viewBox="0 0 ${WIDTH} ${y}" role="img" aria-label="adk-state bench results">`,
    `<style>${style}</style>`,
    `<rect width="${WIDTH}" height="${y}" fill="#ffffff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
