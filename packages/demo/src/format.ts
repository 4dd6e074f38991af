/** Plain-text layout helpers: headed sections and aligned columns. */

/** A value as JSON, cut to `max` characters. */
export function show(value: unknown, max = 48): string {
  const text = value === undefined ? '-' : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Rows of cells, each column padded to its widest cell, every line indented. */
export function table(rows: string[][], indent = 4): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, index) => {
      widths[index] = Math.max(widths[index] ?? 0, [...cell].length);
    });
  }
  return rows.map((row) => {
    const cells = row.map((cell, index) => (index === row.length - 1 ? cell : pad(cell, widths[index] ?? 0)));
    return `${' '.repeat(indent)}${cells.join('  ')}`.trimEnd();
  });
}

/** A section heading: `title` under a rule. */
export function heading(title: string, width = 78): string[] {
  return ['', '='.repeat(width), title, '='.repeat(width)];
}

/** A sub-heading inside a section. */
export function subheading(title: string): string[] {
  return ['', `  ${title}`];
}

function pad(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - [...text].length));
}
