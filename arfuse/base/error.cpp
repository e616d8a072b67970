#include "arfuse/error.hpp"

namespace arfuse {

Error::~Error() = default;

}  // namespace arfuse
