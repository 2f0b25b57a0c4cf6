/**
 * `Math.random` seeded by the host for each run.
 *
 * QuickJS keeps its Math.random state inside the VM's memory and seeds it once, when the
 * context is created. A worker reuses VM instances by resetting them to a prepared image
 * (../worker/warm-vms.ts), so with the engine's own generator every run from one image
 * would draw the same sequence. This replacement (xoshiro128**, 53-bit doubles) takes
 * 128 bits of seed from the host (`hostSync("seed")`, crypto randomness) on its first
 * call in a run; the state lives in the VM, so a resumed snapshot continues its sequence
 * and a reset VM starts unseeded again. It has the built-in's name, length and property
 * attributes.
 *
 * A source fragment spliced into a prelude after prelude-marshal's (it uses `parse`).
 */
export const RANDOM_SOURCE = String.raw`
  {
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0, seeded = false;
    const imul = Math.imul;
    const rotl = (x, k) => (x << k) | (x >>> (32 - k));
    const next = () => {
      const r = imul(rotl(imul(s1, 5), 7), 9) >>> 0;
      const t = s1 << 9;
      s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 11);
      return r;
    };
    const random = {
      random() {
        if (!seeded) {
          const seed = parse(hostSync("seed", ""));
          s0 = seed[0] | 0; s1 = seed[1] | 0; s2 = seed[2] | 0; s3 = seed[3] | 0;
          if ((s0 | s1 | s2 | s3) === 0) s0 = 1;
          seeded = true;
        }
        return ((next() >>> 5) * 67108864 + (next() >>> 6)) / 9007199254740992;
      },
    }.random;
    defineProperty(Math, "random", { value: random, writable: true, enumerable: false, configurable: true });
  }
`;
