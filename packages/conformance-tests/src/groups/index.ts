/** Every group of the suite, in the order they run. */
import type { Group } from '../kit.js';
import { damage } from './damage.js';
import { deletion } from './deletion.js';
import { durability } from './durability.js';
import { events } from './events.js';
import { hostile } from './hostile.js';
import { identity } from './identity.js';
import { importing } from './import.js';
import { incarnations } from './incarnations.js';
import { incremental } from './incremental.js';
import { limits } from './limits.js';
import { listing } from './listing.js';
import { outage } from './outage.js';
import { reappend } from './reappend.js';
import { rejected } from './rejected.js';
import { runtime } from './runtime.js';
import { scoping } from './scoping.js';
import { sessionKeys } from './session-keys.js';
import { stale } from './stale.js';
import { temp } from './temp.js';
import { values } from './values.js';

export const allGroups: readonly Group[] = [
  identity,
  scoping,
  temp,
  values,
  events,
  listing,
  deletion,
  reappend,
  importing,
  stale,
  hostile,
  rejected,
  limits,
  durability,
  incarnations,
  incremental,
  outage,
  damage,
  sessionKeys,
  runtime,
];
