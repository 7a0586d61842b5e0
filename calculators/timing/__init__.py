"""Step time: FLOPs per token (flops), a GPU's dense peak for a precision (rates), the time
model's settings (settings), the operations of a training step on a GPU's roofline (operations),
the traffic of every parallel dimension (communication), their sum with overlap, MFU and hours
(estimate), and the roofline chart's points (roofline).
"""
