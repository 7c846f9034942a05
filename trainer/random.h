// Deterministic random numbers for the trainer's data pipeline and the dataset generator.
//
// Everything random in the pipeline (the per-epoch shuffle, each image's crop and flip)
// is drawn from a generator seeded by (run seed, epoch, image index) alone. The draws
// therefore do not depend on which thread decodes an image, on the number of ranks or on
// whether the run was resumed from a checkpoint: the property that exact resume and the
// single-process / data-parallel equivalence rest on. The algorithms are spelled out
// here (SplitMix64, Lemire's bounded integers) rather than taken from <random>, whose
// distributions differ between standard libraries.
#ifndef TESSERA_TRAINER_RANDOM_H_
#define TESSERA_TRAINER_RANDOM_H_

#include <cstdint>

namespace trainer {

// One step of SplitMix64: a bijective 64-bit mixer with good avalanche.
inline uint64_t MixBits(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A seed for the stream identified by (seed, a, b), e.g. (run seed, epoch, image).
inline uint64_t StreamSeed(uint64_t seed, uint64_t a, uint64_t b) {
  return MixBits(MixBits(MixBits(seed) ^ a) ^ b);
}

// A small generator (SplitMix64 sequence). Not for cryptography.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t NextU64() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method).
  uint64_t Below(uint64_t n) {
    while (true) {
      unsigned __int128 product = static_cast<unsigned __int128>(NextU64()) * n;
      uint64_t low = static_cast<uint64_t>(product);
      if (low >= n || low >= (0 - n) % n) return static_cast<uint64_t>(product >> 64);
    }
  }

  // True with probability 1/2.
  bool Coin() { return (NextU64() >> 63) != 0; }

 private:
  uint64_t state_;
};

}  // namespace trainer

#endif  // TESSERA_TRAINER_RANDOM_H_
