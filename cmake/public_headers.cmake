# The headers installed with libarfuse: the public API, include/arfuse/ and nothing else.
# Everything under arfuse/ is internal to its layer. tests/downstream builds against an install
# tree, checks that exactly these are installed and compiles every one of them there, so a public
# header that includes a private one fails to build.
set(ARFUSE_PUBLIC_HEADERS
    allreduce.hpp arfuse.hpp bootstrap.hpp cache.hpp context.hpp device.hpp epilogue.hpp epilogue_args.hpp error.hpp group.hpp
    modes.hpp quant_modes.hpp settings.hpp target.hpp version.hpp)
