// A tentative chunk: tokens fed to be checked (speculative verification), of which only a
// prefix is kept. The MLA cache, the position and the token history are cut back to it;
// the KDA recurrence cannot be (its updates round, so they cannot be undone), so a
// tentative chunk runs each KDA layer on a scratch copy of its state, records what every
// token's update consumed, and keeping m tokens replays exactly those m updates on the
// live state: the same operations on the same values, without the layer's weights (which a
// streamed trunk no longer holds). Cheaper than copying every KDA state before the chunk
// (one layer's copy is live at a time) and than running the kept tokens again (which reads
// every weight a second time).
#pragma once
#include <cstddef>
#include <vector>

#include "maths/state.hpp"

namespace k3::maths {

/// What the tokens of a tentative chunk fed into one KDA layer's state, token-major; P =
/// heads × head_dim channels.
struct KdaJournal {
  std::size_t tokens = 0;
  std::vector<float> raw_q, raw_k, raw_v;  ///< [T][P] inputs of the short convolutions (their histories)
  std::vector<double> alpha;               ///< [T][P] decay α
  std::vector<double> beta;                ///< [T][H] β
  std::vector<float> k;                    ///< [T][P] normalised k
  std::vector<float> u;                    ///< [T][P] u = v − Sᵀk
};

/// The journals of one tentative chunk (per layer, unused for MLA layers) and the scratch
/// state a KDA layer runs on. Grows to the largest chunk seen and is reused.
struct TentativeChunk {
  std::vector<KdaJournal> kda;
  KdaState scratch;
};

}  // namespace k3::maths
