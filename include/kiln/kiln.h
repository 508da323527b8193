/// \file
/// The public API of Kiln in one include.
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/Backend/Backend.h"
#include "kiln/Backend/ExecutionContext.h"
#include "kiln/Base/Error.h"
#include "kiln/Base/Tensor.h"
#include "kiln/Base/Type.h"
#include "kiln/ExecutionEngine/ExecutionEngine.h"
#include "kiln/Graph/Graph.h"

#endif // KILN_KILN_H
