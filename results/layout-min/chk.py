import lmin
bytes_, roles, acc = lmin.load('t50.json')
p16 = sum(x for x, r in zip(bytes_, roles) if r in (0, 1)); B = int(p16*0.5)
rq = lmin.requests(acc)
b = [(x + 255)//256*256 for x in bytes_]
orig_add = lmin.Arena.add
def add(self, t, off, ln):
    orig_add(self, t, off, ln)
    prev = 0
    for o, u in self.offs:
        assert o >= prev, ('overlap', o, prev, u)
        prev = o + b[u]
    assert prev <= self.B
lmin.Arena.add = add
print(lmin.run_layout(rq, bytes_, B, lmin.sc_inv, 3))
