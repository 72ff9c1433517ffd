// A deliberately backward include: the knowledge base (ff_kb) naming the pipeline, a layer above it.
// Compiled with ff_kb's include directory only (tests/CMakeLists.txt, ctest layers_compiler), it must not
// compile: "firstfault/pipeline.hpp: No such file or directory". Never part of a target that is built.
#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"

int ff_layer_probe() { return 0; }
