/// \file
/// The activations a fused node (FusedConvolution, FusedFullyConnected) applies to its
/// result, named by the node's Activation attribute: one list for the type rule, the
/// Interpreter's reference epilogue and the backends' epilogues.
#ifndef KILN_GRAPH_FUSEDACTIVATION_H
#define KILN_GRAPH_FUSEDACTIVATION_H

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

/// X(name): every fused activation, in the order of FusedActivation.
#define KILN_FUSED_ACTIVATIONS(X)                                                          \
  X(None)                                                                                  \
  X(Relu)        /* max(x, 0) */                                                           \
  X(Clip)        /* min(max(x, Alpha), Beta) */                                            \
  X(LeakyRelu)   /* x >= 0 ? x : Alpha x */                                                \
  X(Sigmoid)     /* 1 / (1 + e^-x) */                                                      \
  X(Tanh)        /* tanh x */                                                              \
  X(Swish)       /* x sigmoid(x) */                                                        \
  X(HardSwish)   /* x min(max(Alpha x + Beta, 0), 1) */                                    \
  X(HardSigmoid) /* min(max(Alpha x + Beta, 0), 1) */                                      \
  X(Gelu)        /* x Phi(x) */                                                            \
  X(GeluTanh)    /* GELU's tanh form */

enum class FusedActivation : uint8_t {
#define KILN_FUSED_ACTIVATION_ENUM(name) name,
  KILN_FUSED_ACTIVATIONS(KILN_FUSED_ACTIVATION_ENUM)
#undef KILN_FUSED_ACTIVATION_ENUM
};

/// The activation named \p name; nullopt for a name not in the list.
std::optional<FusedActivation> parseFusedActivation(const std::string &name);

/// The attribute value naming \p a ("Relu").
const char *getFusedActivationName(FusedActivation a);

/// Every name, comma-separated (for errors).
std::string fusedActivationNames();

} // namespace kiln

#endif // KILN_GRAPH_FUSEDACTIVATION_H
