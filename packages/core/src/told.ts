/**
 * What has been reported already, so that each thing is told once: ids kept
 * up to `limit`, then all forgotten at once (a process that meets very many
 * damaged records repeats a warning rather than grow without bound).
 */
export class ToldOnce {
  readonly #told = new Set<string>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** True the first time `id` is given (since the ids were last forgotten), false after. */
  first(id: string): boolean {
    if (this.#told.has(id)) return false;
    if (this.#told.size >= this.#limit) this.#told.clear();
    this.#told.add(id);
    return true;
  }
}
