//===- ForwardTo.h - a namespace's function as a static member ------------===//
//
// Layer compositions written once over a target (the stage interpreter, the
// layer recipes) take the target as a struct of static functions; this
// makes function `name` of namespace `ns` such a member, overloads and
// default arguments included.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_FORWARDTO_H
#define HYPIPE_RUNTIME_KERNELS_FORWARDTO_H

#include <utility>

#define HYPIPE_FORWARD_TO(ns, name)                                            \
  template <class... A> static decltype(auto) name(A &&...a) {                 \
    return ns::name(std::forward<A>(a)...);                                    \
  }

#endif
