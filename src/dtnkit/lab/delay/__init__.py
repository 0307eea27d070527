"""The parts of the lab's userspace delay stage (the program is :mod:`dtnkit.lab.nfqdelay`;
its NFQUEUE messages are :mod:`dtnkit.lab.nfqueue`): the config, the stats document, the
engine and its split form, one lane per direction."""
