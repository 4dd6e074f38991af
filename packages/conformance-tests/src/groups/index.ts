/** Every group of the suite, in the order they run. */
import type { Group } from '../kit.js';
import { identity } from './identity.js';

export const allGroups: readonly Group[] = [identity];
