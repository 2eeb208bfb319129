"""Pure models of tasq's kinds and of the core objects it reads, its constants and quantities.

Imported by every other package; imports nothing that talks to the API, the clock or asyncio.
"""
