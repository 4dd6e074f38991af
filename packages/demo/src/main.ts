/**
 * adk-state demo: a few turns of a real `@google/adk` Runner conversation on
 * the memory store, printing after each turn what every state scope holds.
 *
 * Offline by default (a scripted model). With GOOGLE_GENAI_API_KEY set, the
 * same conversation runs on Gemini instead.
 */
import { MemorySessionService } from '@adk-state/adapter-memory';
import { scopeOf } from '@adk-state/core/store';
import { type BaseLlm, type Event, Gemini, Runner, type Session } from '@google/adk';
import { concierge, STATE_LINE, type TurnProbe } from './agent.js';
import { heading, show, subheading, table } from './format.js';
import { type Reply, ScriptedModel } from './scripted-model.js';

const APP = 'book-club';
const FEATURED = 'The Left Hand of Darkness';

interface Turn {
  userId: string;
  sessionId: string;
  text: string;
  /** What the scripted model answers, call by call, in this turn. */
  script: Reply[];
}

/** Every user has two sessions: the one they talk in, and another one that only reads. */
const SESSIONS: Record<string, [talk: string, other: string]> = {
  alice: ['morning', 'evening'],
  bob: ['lunch', 'dinner'],
};

const TURNS: Turn[] = [
  {
    userId: 'alice',
    sessionId: 'morning',
    text: "Hi, I'm Ada and I love science fiction.",
    script: [
      { tool: 'log_visit' },
      { tool: 'remember_reader', args: { name: 'Ada', genre: 'science fiction' } },
      { text: 'Welcome, Ada! I will remember that you love science fiction.' },
    ],
  },
  {
    userId: 'alice',
    sessionId: 'morning',
    text: 'What should I read next?',
    script: [
      { tool: 'log_visit' },
      {
        text: (instruction) =>
          `Since you like ${field(instruction, 'Likes')}, try ${field(instruction, 'Featured')}, our featured book.`,
      },
    ],
  },
  {
    userId: 'bob',
    sessionId: 'lunch',
    text: 'Hello! Anything good this week?',
    script: [
      { tool: 'log_visit' },
      { text: (instruction) => `This week's featured book is ${field(instruction, 'Featured')}.` },
    ],
  },
];

/** The value between the brackets after `label:` in the rendered state line. */
function field(instruction: string, label: string): string {
  return new RegExp(`${label}: \\[([^\\]]*)\\]`).exec(instruction)?.[1] || '(unknown)';
}

function chooseModel(): { model: BaseLlm; label: string } {
  const apiKey = process.env.GOOGLE_GENAI_API_KEY;
  if (apiKey) return { model: new Gemini({ model: 'gemini-2.5-flash', apiKey }), label: 'Gemini (gemini-2.5-flash)' };
  return {
    model: new ScriptedModel(TURNS.flatMap((turn) => turn.script)),
    label: 'scripted (offline; set GOOGLE_GENAI_API_KEY to use Gemini)',
  };
}

const SCOPE_ORDER = ['session', 'user', 'app', 'temp'] as const;

/** A key's scope as the table shows it: `session`, or the prefix (`user:`, `app:`, `temp:`). */
function scopeLabel(key: string): string {
  const scope = scopeOf(key);
  return scope === 'session' ? scope : `${scope}:`;
}

function byScope(a: string, b: string): number {
  return SCOPE_ORDER.indexOf(scopeOf(a)) - SCOPE_ORDER.indexOf(scopeOf(b)) || a.localeCompare(b);
}

function deltaRow(event: Event | undefined): string[][] {
  const delta = event?.actions?.stateDelta ?? {};
  const keys = Object.keys(delta);
  if (keys.length === 0) return [];
  return [['', `  stored delta: ${keys.map((key) => `${key}=${show(delta[key], 24)}`).join(', ')}`]];
}

/** One line per event the runner yielded, then the delta the store kept for it. */
function transcript(turn: Turn, yielded: Event[], stored: Session | undefined): string[] {
  const storedById = new Map((stored?.events ?? []).map((event) => [event.id, event]));
  const rows: string[][] = [[turn.userId, `> ${show(turn.text, 64)}`]];
  for (const event of yielded) {
    const author = event.author ?? '';
    if (event.errorCode || event.errorMessage) {
      rows.push([author, `failed: ${event.errorCode ?? ''} ${show(event.errorMessage ?? '', 60)}`]);
    }
    for (const part of event.content?.parts ?? []) {
      if (part.functionCall) {
        rows.push([author, `calls ${part.functionCall.name}(${show(part.functionCall.args ?? {}, 50)})`]);
      } else if (part.functionResponse) {
        rows.push([
          '(tool)',
          `${part.functionResponse.name} returned ${show(part.functionResponse.response ?? {}, 40)}`,
        ]);
      } else if (part.text) {
        rows.push([author, `< ${show(part.text, 64)}`]);
      }
    }
    rows.push(...deltaRow(storedById.get(event.id)));
  }
  return table(rows);
}

/** Every key the turn saw or the store holds, with both values side by side. */
async function scopeTable(
  service: MemorySessionService,
  turn: Turn,
  probe: TurnProbe,
  stored: Session | undefined,
): Promise<string[]> {
  const userBucket = await service.getUserState({ appName: APP, userId: turn.userId });
  const appBucket = await service.getAppState({ appName: APP });
  const storedFlat: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(stored?.state ?? {})) {
    if (scopeOf(key) === 'session') storedFlat[key] = value;
  }
  for (const [key, value] of Object.entries(userBucket)) storedFlat[`user:${key}`] = value;
  for (const [key, value] of Object.entries(appBucket)) storedFlat[`app:${key}`] = value;
  const keys = [...new Set([...Object.keys(probe.stateAtEnd), ...Object.keys(storedFlat)])].sort(byScope);
  const rows = [['scope', 'key', 'during the turn', 'stored']];
  for (const key of keys) {
    const storedValue =
      scopeOf(key) === 'temp' ? '(never stored)' : key in storedFlat ? show(storedFlat[key], 30) : '-';
    rows.push([scopeLabel(key), key, key in probe.stateAtEnd ? show(probe.stateAtEnd[key], 30) : '-', storedValue]);
  }
  return table(rows);
}

/** What a fresh read of another session shows: the speaker's other session, and the other user's. */
async function otherViews(service: MemorySessionService, turn: Turn): Promise<string[]> {
  const otherUser = Object.keys(SESSIONS).find((userId) => userId !== turn.userId) ?? '';
  const views: Array<[string, string, string]> = [
    [turn.userId, SESSIONS[turn.userId]?.[1] ?? '', 'same user'],
    [otherUser, SESSIONS[otherUser]?.[0] ?? '', 'another user'],
  ];
  const rows: string[][] = [];
  for (const [userId, sessionId, relation] of views) {
    const session = await service.getSession({ appName: APP, userId, sessionId });
    const keys = Object.keys(session?.state ?? {}).sort(byScope);
    const label = `${userId}/${sessionId}`;
    if (keys.length === 0) rows.push([label, `(${relation})`, '(empty)', '']);
    keys.forEach((key, index) => {
      rows.push(
        index === 0
          ? [label, `(${relation})`, key, show(session?.state[key])]
          : ['', '', key, show(session?.state[key])],
      );
    });
  }
  return table(rows);
}

async function main(): Promise<void> {
  const { model, label } = chooseModel();
  const service = new MemorySessionService();
  const probe: TurnProbe = { instructions: [], stateAtEnd: {} };
  const runner = new Runner({ appName: APP, agent: concierge(model, probe), sessionService: service });

  // alice's first session carries an app: value in its initial state; it lands in the app bucket.
  for (const [userId, sessionIds] of Object.entries(SESSIONS)) {
    for (const sessionId of sessionIds) {
      const state = userId === 'alice' && sessionId === 'morning' ? { 'app:featured': FEATURED } : {};
      await service.createSession({ appName: APP, userId, sessionId, state });
    }
  }

  const out: string[] = [
    'adk-state demo: session state scopes through a real @google/adk Runner',
    ...table(
      [
        ['store', 'MemorySessionService (@adk-state/adapter-memory)'],
        ['model', label],
        ['app', APP],
        [
          'sessions',
          Object.entries(SESSIONS)
            .map(([u, s]) => s.map((id) => `${u}/${id}`).join(', '))
            .join(', '),
        ],
        ['template', STATE_LINE],
      ],
      2,
    ),
  ];
  console.log(out.join('\n'));

  for (const [index, turn] of TURNS.entries()) {
    probe.instructions = [];
    probe.stateAtEnd = {};
    const yielded: Event[] = [];
    for await (const event of runner.runAsync({
      userId: turn.userId,
      sessionId: turn.sessionId,
      newMessage: { role: 'user', parts: [{ text: turn.text }] },
    })) {
      if (!event.partial) yielded.push(event);
    }
    const stored = await service.getSession({ appName: APP, userId: turn.userId, sessionId: turn.sessionId });

    const lines = [
      ...heading(`Turn ${index + 1}: ${turn.userId} in session "${turn.sessionId}"`),
      ...subheading('Conversation (each event as the runner yielded it; deltas as stored)'),
      ...transcript(turn, yielded, stored),
      ...subheading('State line of the instruction at each model call ({key} templates rendered)'),
      ...table(probe.instructions.map((text, call) => [`call ${call + 1}`, text.split('\n').at(-1) ?? ''])),
      ...subheading(`State of ${turn.userId}/${turn.sessionId}: inside the invocation vs. in the store`),
      ...(await scopeTable(service, turn, probe, stored)),
      ...subheading('What other sessions see now (fresh getSession)'),
      ...(await otherViews(service, turn)),
    ];
    console.log(lines.join('\n'));
  }

  const tempInLog = [];
  for (const [userId, sessionIds] of Object.entries(SESSIONS)) {
    for (const sessionId of sessionIds) {
      const session = await service.getSession({ appName: APP, userId, sessionId });
      for (const event of session?.events ?? []) {
        tempInLog.push(...Object.keys(event.actions?.stateDelta ?? {}).filter((key) => key.startsWith('temp:')));
      }
    }
  }
  console.log(
    [
      ...heading('Summary'),
      ...table(
        [
          ['user bucket of alice', show(await service.getUserState({ appName: APP, userId: 'alice' }), 70)],
          ['user bucket of bob', show(await service.getUserState({ appName: APP, userId: 'bob' }), 70)],
          ['app bucket', show(await service.getAppState({ appName: APP }), 70)],
          ['temp: keys in stored events', tempInLog.length === 0 ? 'none' : tempInLog.join(', ')],
        ],
        2,
      ),
    ].join('\n'),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
