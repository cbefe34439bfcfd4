// Board runner (placeholder until the firmware issue lands the bundle and
// .pte modes): reports the runtime's format version so a build can be
// checked with `idf.py build flash monitor`. Never run on hardware yet.
#include <stdio.h>

#include "espnn/xts3_format.h"

extern "C" void app_main(void) {
  printf("executorch-espnn runner: XTS3 format version %u\n",
         (unsigned)espnn::xts3::kFormatVersion);
}
