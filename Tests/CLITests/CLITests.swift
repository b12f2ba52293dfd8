// CLITests: placeholder until the suite lands.
