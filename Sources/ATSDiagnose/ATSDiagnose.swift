// ATSDiagnose: placeholder until the module lands.
