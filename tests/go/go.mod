module lantern/templatecheck

go 1.19
