"""The support team's side of handoffs: who is available (presence), when the office is open
(office hours), the canned replies they insert, and the handoffs waiting for them (their
bounds and fair order). Below the service and the hand-off hooks, which read them; the desk
(a part above) shows and changes them through the service.
"""
