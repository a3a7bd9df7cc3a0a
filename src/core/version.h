/* The one place the version lives: `herd --version`, the Server header
 * and the lab report all read it from here. */
#ifndef HERD_CORE_VERSION_H
#define HERD_CORE_VERSION_H

#define HERD_VERSION "0.1.0"

#endif
