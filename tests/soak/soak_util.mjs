// What the soaks and the cluster tests share: their flags, a seeded random
// number generator (mulberry32), so a soak is reproducible up to timing, the
// words their texts are made of, and a free loopback port.
import net from 'node:net';

export const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
export function seededRandom(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
export const WORDS = ('river mountain engine library garden window winter coffee market train doctor violin ' +
  'planet bridge harbor forest teacher kitchen dragon pencil castle desert ocean thunder candle').split(' ');

// A TCP port free on 127.0.0.1 now (another program may take it before it is bound).
export function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
