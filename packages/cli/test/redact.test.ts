/** `redactUri` and `Redactor`: no form of a store URI lets its password through. */
import { describe, expect, it } from 'vitest';
import { Redactor, redactUri, secretsOf } from '../src/redact.js';

describe('redactUri', () => {
  it.each([
    ['redis://:pw@h:1', 'redis://:***@h:1'],
    ['redis://me:p%40ss@h:1/2', 'redis://me:***@h:1/2'],
    ['mongodb+srv://me:p%40ss@cluster0/db?x=1', 'mongodb+srv://me:***@cluster0/db?x=1'],
    ['redis://:pa/ss@h:6379/0', 'redis://:***@h:6379/0'],
    ['redis://:pa#ss@h:6379/0', 'redis://:***@h:6379/0'],
    ['redis://:pa?ss@h:6379/0', 'redis://:***@h:6379/0'],
    ['redis://:p@ss@h:6379/0', 'redis://:***@h:6379/0'],
    ['redis://me:a/b#c?d@e@h:6379/0', 'redis://me:***@h:6379/0'],
    ['rediss+cluster://me:s/3#c@h1:1,h2:2', 'rediss+cluster://me:***@h1:1,h2:2'],
    ['redis://h:6379/0?password=se@cr/et', 'redis://h:6379/0?password=***'],
    ['redis://h:6379/0?db=1&password=se#cret&family=4', 'redis://h:6379/0?db=1&password=***&family=4'],
    ['postgresql://h/db?user=me&Password=x', 'postgresql://h/db?user=me&Password=***'],
    ['mongodb://me:pw@h/db?authSource=admin', 'mongodb://me:***@h/db?authSource=admin'],
  ])('%s → %s', (uri, redacted) => {
    expect(redactUri(uri)).toBe(redacted);
  });

  it('keeps what holds no password', () => {
    expect(redactUri('redis://me@h')).toBe('redis://me@h');
    expect(redactUri('memory://')).toBe('memory://');
    expect(redactUri('firestore://project?root=x')).toBe('firestore://project?root=x');
    expect(redactUri('not a uri: p@ss')).toBe('not a uri: p@ss');
  });
});

describe('Redactor', () => {
  it('hides a URI and its password in any text, raw, decoded and encoded', () => {
    const uri = 'redis://me:s3%2Fcr#t@h:1/0';
    const redactor = new Redactor([uri]);
    const text = redactor.redact(
      `failed on ${uri}; the client said: bad password s3/cr#t (sent as s3%2Fcr#t, or s3%2Fcr%23t)`,
    );
    expect(text).toBe('failed on redis://me:***@h:1/0; the client said: bad password *** (sent as ***, or ***)');
  });

  it('hides the value of a password= parameter, and takes more URIs as they come', () => {
    const redactor = new Redactor();
    redactor.add('redis://h/0?password=hunter2!');
    expect(redactor.redact('AUTH hunter2! refused')).toBe('AUTH *** refused');
    expect(secretsOf('redis://h/0?password=a%20b')).toEqual(['a%20b', 'a b']);
  });
});
