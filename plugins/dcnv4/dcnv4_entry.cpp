// The entry point of libqd_dcnv4.so, the DCNv4 plugin built as a library (`qdeploy ... --plugin libqd_dcnv4.so`).
// qdeploy has DCNv4 built in; this build exists to show that the plugin API alone suffices, and to let a newer
// build of the plugin replace the built-in one.
#include <cstdio>

#include "dcnv4.h"

extern "C" __attribute__((visibility("default"))) int QD_PLUGIN_ENTRY(qdeploy::PluginRegistrar* registrar, char* error,
                                                                       size_t error_size) {
  qdeploy::Status st = registrar->add(qd_dcnv4::op_def());
  if (st.is_ok()) return 0;
  if (error && error_size) std::snprintf(error, error_size, "%s", st.message().c_str());
  return 1;
}
