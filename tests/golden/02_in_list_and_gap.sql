select count(*) from orders where id in (2, 20, 25)
