#include "base/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace shardify {

uint64_t Checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

Checksum64Stream::Checksum64Stream() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}
Checksum64Stream::~Checksum64Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Checksum64Stream::Update(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}
uint64_t Checksum64Stream::Digest() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

}  // namespace shardify
