// libpq, PostgreSQL's client library, for the team store (CaptureStore's Postgres* files).
#pragma once
#include <libpq-fe.h>
