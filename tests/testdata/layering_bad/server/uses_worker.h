#include "worker/trainer.h"
